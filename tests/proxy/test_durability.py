"""When a proxied call's capture is durable (docs/proxy.md, "When a capture is durable"): a
SIGTERM right after the answers still appends every capture; once
``ledger_proxy_captures_pending`` reads 0, a SIGKILL loses none. And the front route times
the request body itself (it is served before the app's body-deadline middleware)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
import uuid
from pathlib import Path

import httpx
import pytest

from ledger.gym.dialects import MODEL_CALL_ID_HEADER
from tests.proxy.support import sqlite_proxy_server
from tests.support.fake_upstream import FakeUpstreamProcess
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

CALLS = 40


async def _answered_ids(base_url: str, rollout_id: str) -> list[str]:
    """``CALLS`` concurrent calls into one rollout; the model_call_id each answer carried."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        responses = await asyncio.gather(
            *(
                client.post(
                    f"/ng-rollout/{rollout_id}/v1/chat/completions",
                    json={"model": "plain", "messages": [{"role": "user", "content": str(n)}]},
                )
                for n in range(CALLS)
            )
        )
    assert {r.status_code for r in responses} == {200}
    return [r.headers[MODEL_CALL_ID_HEADER] for r in responses]


def _stored_ids(server: ServerProcess, rollout_id: str) -> list[str]:
    body = httpx.get(f"{server.base_url}/v1/rollouts/{rollout_id}/model-calls").json()
    return sorted(call["model_call_id"] for call in body["calls"])


def _pending(server: ServerProcess) -> float:
    for line in httpx.get(f"{server.base_url}/metrics").text.splitlines():
        if line.startswith("ledger_proxy_captures_pending "):
            return float(line.split()[1])
    raise AssertionError("no ledger_proxy_captures_pending in /metrics")


def test_sigterm_right_after_the_answers_appends_every_capture(
    tmp_path: Path, upstream: FakeUpstreamProcess
) -> None:
    rollout_id = f"term-{uuid.uuid4().hex[:8]}"
    server = sqlite_proxy_server(tmp_path, upstream).start(timeout=60)
    answered = asyncio.run(_answered_ids(server.base_url, rollout_id))
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)  # at once: captures are still queued
    server.process.wait(timeout=60)
    with sqlite_proxy_server(tmp_path, upstream) as restarted:
        assert _stored_ids(restarted, rollout_id) == sorted(answered)


def test_once_nothing_is_pending_a_sigkill_loses_no_capture(
    tmp_path: Path, upstream: FakeUpstreamProcess
) -> None:
    rollout_id = f"kill-{uuid.uuid4().hex[:8]}"
    server = sqlite_proxy_server(tmp_path, upstream).start(timeout=60)
    answered = asyncio.run(_answered_ids(server.base_url, rollout_id))
    deadline = time.monotonic() + 30
    while _pending(server) and time.monotonic() < deadline:
        time.sleep(0.01)  # poll: the gauge falls as each batch commits
    assert _pending(server) == 0
    server.kill()  # no shutdown handler runs
    with sqlite_proxy_server(tmp_path, upstream) as restarted:
        assert _stored_ids(restarted, rollout_id) == sorted(answered)


def test_a_request_body_that_trickles_is_cut_off_with_a_408(
    tmp_path: Path, upstream: FakeUpstreamProcess
) -> None:
    with sqlite_proxy_server(tmp_path, upstream, LEDGER_BODY_TIMEOUT_S="1") as server:
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(
                b"POST /ng-rollout/r1/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            )
            answer = b""
            while chunk := sock.recv(65536):  # the server closes the connection after it
                answer += chunk
        assert time.monotonic() - started < 20
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 ")
        error = json.loads(body)
        assert error["type"] == "error"  # /v1/messages: Anthropic's error shape
        assert "not received within 1 s" in error["error"]["message"]
        assert not [r for r in upstream.requests() if r["path"] == "/v1/messages"]
