"""Slow clients against a real ``ledger serve`` (issue 14: 300 slow connections stayed open
for 30 s and about 1,000 made /healthz fail): connections that trickle their headers or their
body are closed after the header and body timeouts, the connection limit holds, and /healthz
answers throughout or as soon as the slow ones are gone."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.server import ServerProcess

TIMEOUTS = {
    "LEDGER_HEADER_TIMEOUT_S": "1",
    "LEDGER_BODY_TIMEOUT_S": "1",
    "LEDGER_MAX_CONNECTIONS": "64",
}


def partial_headers(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return sock


def partial_body(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"POST /v1/rollouts/r1/result HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"task_id"'
    )
    return sock


def wait_closed(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    raise AssertionError(f"the server kept a slow connection open (received {received!r})")


def healthz_until_ok(base_url: str, deadline: float) -> int:
    """Poll /healthz; the number of attempts it took."""
    attempts = 0
    while time.monotonic() < deadline:
        attempts += 1
        try:
            if httpx.get(f"{base_url}/healthz", timeout=10).status_code == 200:
                return attempts
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # poll
    raise AssertionError("/healthz never answered")


@contextmanager
def server_with_timeouts(tmp_path: Path, database_url: str) -> Iterator[ServerProcess]:
    with ServerProcess(data_dir=tmp_path, database_url=database_url, env=TIMEOUTS) as server:
        yield server


def test_slow_headers_and_bodies_are_cut_off(tmp_path: Path, database_url: str) -> None:
    with server_with_timeouts(tmp_path, database_url) as server:
        slow_headers = [partial_headers(server.port) for _ in range(20)]
        slow_bodies = [partial_body(server.port) for _ in range(20)]
        try:
            # Below the connection limit: /healthz answers while they hang.
            assert httpx.get(f"{server.base_url}/healthz", timeout=30).status_code == 200
            deadline = time.monotonic() + 60
            for sock in slow_headers:
                assert wait_closed(sock, deadline) == b""
            for sock in slow_bodies:
                reply = wait_closed(sock, deadline)
                assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        finally:
            for sock in slow_headers + slow_bodies:
                sock.close()
        events = httpx.get(f"{server.base_url}/v1/events", timeout=30).json()["events"]
        assert events == []


def test_healthz_recovers_from_more_slow_connections_than_the_limit(
    tmp_path: Path, database_url: str
) -> None:
    with server_with_timeouts(tmp_path, database_url) as server:
        slow = [partial_headers(server.port) for _ in range(300)]
        try:
            healthz_until_ok(server.base_url, time.monotonic() + 60)
            deadline = time.monotonic() + 60
            for sock in slow:
                wait_closed(sock, deadline)
        finally:
            for sock in slow:
                sock.close()
        assert server.process is not None and server.process.poll() is None
        assert httpx.get(f"{server.base_url}/healthz", timeout=30).status_code == 200
