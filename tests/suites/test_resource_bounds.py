"""Resource bounds under hostile clients (issue 14, standing suites).

While slowloris clients trickle headers and bodies, idle connections pile up (below the
connection limit; above it, tests/process/test_slow_clients.py shows /healthz recovering
once the header timeout closes them), every operation in the OpenAPI document is sent an
oversized body (declared and chunked) and another process keeps a core busy, a poller in its
own process asks ``/healthz`` throughout, of the attacked server and of an idle control
server in turn. Every poll answers 200; the issue's 100 ms bound holds for what the attack
adds to the 99th percentile of polls (the attacked server's p99 less the idle control's over
the same seconds: what a loaded machine costs any server is not the attack's), and the
attacked server's worst poll exceeds the control's worst by less than 3 s. The server's peak
RSS stays under MAX_RSS_MIB. The observed figures are printed (docs/operations.md has them).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.process.test_hostile_bodies import rss_kib
from tests.support.databases import sqlite_url
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

HEALTHZ_P99_EXCESS_MS = 100.0  # the bound, on the 99th percentile of polls
# No single poll: a backstop against a hung server. Not 1 s: at 99 % CPU pressure (others'
# load, load average 15-21) the attacked server, a busy process, was once not scheduled for
# 1.3-2.2 s while the idle control answered in under 0.1 s (docs/decisions.md).
HEALTHZ_MAX_EXCESS_MS = 3000.0
MAX_RSS_MIB = 256  # peak resident set of the server process over the whole run
ATTACK_SECONDS = 15.0
BODY_LIMIT = 1024 * 1024
OVERSIZED = 2 * BODY_LIMIT
IDLE_CONNECTIONS = 80
SLOW_HEADER_CLIENTS = 10
SLOW_BODY_CLIENTS = 10
ENV = {
    "LEDGER_HEADER_TIMEOUT_S": "1",
    "LEDGER_BODY_TIMEOUT_S": "1",
    "LEDGER_MAX_CONNECTIONS": "128",
    "LEDGER_MAX_BODY_BYTES": str(BODY_LIMIT),
    "LEDGER_CONTROL_TOKEN": "bounds-control",
}


@dataclass
class Observed:
    slow_cut_off: int = 0
    slow_answered_408: int = 0
    idle_closed_by_server: int = 0
    oversized: dict[str, int] = field(default_factory=dict)


def trickle(port: int, head: bytes, stop: threading.Event) -> bytes:
    """Send ``head`` then one byte every 0.2 s until the server closes; what it answered."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head)
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                try:
                    sock.sendall(b"x")
                except OSError:
                    return b""
                continue
            except ConnectionResetError:
                return b""
            return chunk
    return b""


def slow_header_client(port: int, stop: threading.Event, seen: Observed) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    while not stop.is_set():
        if trickle(port, head, stop) == b"" and not stop.is_set():
            seen.slow_cut_off += 1


def slow_body_client(port: int, stop: threading.Event, seen: Observed) -> None:
    head = (
        b"POST /v1/rollouts/r1/result HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"task_id": "'
    )
    while not stop.is_set():
        reply = trickle(port, head, stop)
        if reply.startswith(b"HTTP/1.1 408"):
            seen.slow_answered_408 += 1
        elif not stop.is_set():
            seen.slow_cut_off += 1


def idle_client(port: int, stop: threading.Event, seen: Observed) -> None:
    """Hold a connection that sends nothing; open another when the server drops it."""
    while not stop.is_set():
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.settimeout(0.2)
            while not stop.is_set():
                try:
                    if sock.recv(1) == b"":
                        seen.idle_closed_by_server += 1
                        break
                except TimeoutError:
                    continue
                except ConnectionResetError:
                    seen.idle_closed_by_server += 1
                    break


def oversized_sender(
    base_url: str, operations: list[tuple[str, str, bool]], stop: threading.Event, seen: Observed
) -> None:
    """A body twice the limit to every operation with its length declared, and chunked to
    those that read a body (one that reads none never buffers it: it answers as usual)."""
    body = b"[" + b"0," * (OVERSIZED // 2) + b"0]"

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    headers = {"content-type": "application/json", "authorization": "Bearer bounds-control"}
    with httpx.Client(base_url=base_url, timeout=30) as http:
        while not stop.is_set():
            for method, path, reads_body in operations:
                shapes: list[tuple[str, bytes | Iterator[bytes]]] = [("declared", body)]
                if reads_body:
                    shapes.append(("chunked", chunks()))
                for shape, content in shapes:
                    try:
                        reply = http.request(method, path, content=content, headers=headers)
                    except httpx.TransportError as exc:
                        # The server answered 413 and closed while the client still sent: the
                        # client may see the close before the answer. Refused either way.
                        key = f"{method} {path} ({shape}): closed ({type(exc).__name__})"
                        seen.oversized[key] = seen.oversized.get(key, 0) + 1
                        continue
                    key = f"{method} {path} ({shape}): {reply.status_code}"
                    seen.oversized[key] = seen.oversized.get(key, 0) + 1
                    assert reply.status_code != 413 or len(reply.content) < 8 * 1024, key


def start_poller(seconds: float, *base_urls: str) -> subprocess.Popen[str]:
    """tests/suites/healthz_poller.py in its own process; returns once its connections are
    open (it says "ready")."""
    poller = subprocess.Popen(
        [sys.executable, "-m", "tests.suites.healthz_poller", str(seconds), *base_urls],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert poller.stderr is not None
    assert poller.stderr.readline().strip() == "ready", poller.communicate(timeout=60)
    return poller


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def describe(latencies_ms: list[float]) -> str:
    return (
        f"p50 {percentile(latencies_ms, 0.5):.0f} ms, p99 {percentile(latencies_ms, 0.99):.0f}"
        f" ms, max {max(latencies_ms):.0f} ms"
    )


def every_operation(base_url: str) -> list[tuple[str, str, bool]]:
    """(method, path, reads a body) of every operation in the OpenAPI document."""
    document = httpx.get(f"{base_url}/openapi.json", timeout=30).json()
    return [
        (method.upper(), path.replace("{rollout_id}", "r1"), "requestBody" in operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]


def test_healthz_answers_and_memory_stays_bounded_under_hostile_clients(
    tmp_path: Path, database_url: str
) -> None:
    seen = Observed()
    stop = threading.Event()
    control_dir = tmp_path / "control"
    control_dir.mkdir()
    with (
        ServerProcess(data_dir=tmp_path, database_url=database_url, env=ENV) as server,
        ServerProcess(
            data_dir=control_dir,
            database_url=sqlite_url(control_dir),
            env=ENV,
            argv=("ledger", "serve", "--upgrade"),
        ) as control,
    ):
        assert server.process is not None
        paths = every_operation(server.base_url)
        # The condition: another process keeps a core busy throughout.
        busy_core = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        poller = start_poller(ATTACK_SECONDS, server.base_url, control.base_url)
        workers: list[tuple[Callable[..., None], tuple[object, ...]]] = [
            (oversized_sender, (server.base_url, paths, stop, seen)),
        ]
        workers += [(idle_client, (server.port, stop, seen))] * IDLE_CONNECTIONS
        workers += [(slow_header_client, (server.port, stop, seen))] * SLOW_HEADER_CLIENTS
        workers += [(slow_body_client, (server.port, stop, seen))] * SLOW_BODY_CLIENTS
        errors: list[BaseException] = []

        def guarded(target: Callable[..., None], args: tuple[object, ...]) -> None:
            try:
                target(*args)
            except BaseException as exc:  # a failing worker fails the test
                errors.append(exc)
                stop.set()

        threads = [threading.Thread(target=guarded, args=w, daemon=True) for w in workers]
        try:
            for thread in threads:
                thread.start()
            # The poller's run is the length of the attack.
            polled, _ = poller.communicate(timeout=ATTACK_SECONDS + 120)
        finally:
            stop.set()
            busy_core.kill()
            busy_core.wait()
        for thread in threads:
            thread.join(timeout=30)
        rss_peak_kib = rss_kib(server.process.pid)[1]  # VmHWM: the peak over the whole run
        events = httpx.get(f"{server.base_url}/v1/events", timeout=30).json()["events"]
    server_log = server.log_path.read_text()
    report = json.loads(polled)
    attacked = [row[0] for row in report["polls"]]
    idle = [row[1] for row in report["polls"]]
    excess_p99 = percentile(attacked, 0.99) - percentile(idle, 0.99)
    excess_max = max(attacked) - max(idle)
    outcomes = {key.rsplit(": ", 1)[1].split(" ")[0] for key in seen.oversized}
    print(
        f"\nresource bounds: {len(attacked)} /healthz polls; attacked {describe(attacked)}; "
        f"idle control {describe(idle)}; the attack adds {excess_p99:.0f} ms to p99, "
        f"{excess_max:.0f} ms to the max; "
        f"peak RSS {rss_peak_kib // 1024} MiB; "
        f"{seen.slow_cut_off} slow connections cut off, {seen.slow_answered_408} answered 408, "
        f"{seen.idle_closed_by_server} idle ones closed; "
        f"{sum(seen.oversized.values())} oversized bodies over {len(paths)} operations, "
        f"outcomes {sorted(outcomes)}"
    )
    assert errors == [], errors
    assert report["failures"] == [], report["failures"][:5]
    assert len(attacked) >= ATTACK_SECONDS * 5  # at least 5 a second, whatever the load
    assert excess_p99 <= HEALTHZ_P99_EXCESS_MS, (describe(attacked), describe(idle))
    assert excess_max <= HEALTHZ_MAX_EXCESS_MS, (describe(attacked), describe(idle))
    assert rss_peak_kib < MAX_RSS_MIB * 1024
    assert outcomes <= {"413", "closed"}, sorted(seen.oversized)
    assert "413" in outcomes
    assert {f"{m} {p}" for m, p, _ in paths} == {k.split(" (")[0] for k in seen.oversized}
    assert seen.slow_answered_408 > 0 and seen.slow_cut_off > 0
    assert seen.idle_closed_by_server > 0
    assert events == [], "a hostile request wrote into the log"
    # A client leaving mid-body is no error of the server's (nor a traceback in its log).
    assert "Exception in ASGI application" not in server_log, server_log[-3000:]
