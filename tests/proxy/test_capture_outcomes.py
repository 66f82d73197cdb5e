"""What each way a proxied call ends does to its rollout, through the app in process against a
raw loopback upstream: an answer over the capture limit is captured without its body and marks
the rollout incomplete; a call the upstream never answered (a timeout, a bad status line,
oversized headers) is captured whole, its category saying why, and marks nothing.

The app is shut down before the checks: shutdown waits for every queued capture and every
incomplete marker, so what the reopened ledger shows is all the recorder will ever do.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from ledger.app.bootstrap import Ledger
from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.areas.proxy.upstream_client import MAX_HEADER_BYTES
from tests.proxy.test_upstream_client import Handler, answering, raw_server, read_request

CHAT = "/v1/chat/completions"
MAX_RESPONSE_BYTES = 1024
READ_TIMEOUT_S = 0.5


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    await reader.read()  # never answers; holds the connection until the proxy closes it


async def _oversized_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    # Never ending: the header block passes the bound while it is still incomplete.
    writer.write(b"HTTP/1.1 200 OK\r\nx-padding: " + b"a" * (MAX_HEADER_BYTES + 1))
    await writer.drain()
    await reader.read()


_LARGE = b"{" + b" " * (2 * MAX_RESPONSE_BYTES) + b"}"
_TOO_LARGE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    + b"content-length: %d\r\n\r\n" % len(_LARGE)
    + _LARGE
)


def _settings(tmp_path: Path, database_url: str, upstream: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        upstreams={"raw": upstream},
        proxy_read_timeout_s=READ_TIMEOUT_S,
        proxy_max_response_bytes=MAX_RESPONSE_BYTES,
        proxy_capture_process=False,
    )


async def _call_then_shut_down(
    settings: Settings, rollout_id: str
) -> tuple[httpx.Response, CollectorRegistry]:
    """One proxied call, then the app's shutdown (every capture and marker done)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        ledger: Ledger = app.state.ledger
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            response = await http.post(
                f"/ng-rollout/{rollout_id}{CHAT}", json={"model": "m", "messages": []}
            )
    return response, ledger.metrics.registry


async def _stored(settings: Settings, rollout_id: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The rollout's capture records and gap codes, read from a ledger opened afresh."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            calls = (await http.get(f"/v1/rollouts/{rollout_id}/model-calls")).json()["calls"]
            capture = await http.get(f"/v1/rollouts/{rollout_id}/ng_model_call_capture")
    return calls, [gap["code"] for gap in capture.json().get("gaps", [])]


def _capture_failures(registry: CollectorRegistry) -> float:
    total = 0.0
    for family in registry.collect():
        if family.name == "ledger_proxy_capture_failures":
            total += sum(s.value for s in family.samples if s.name.endswith("_total"))
    return total


@pytest.mark.parametrize(
    ("handler", "status", "category"),
    [
        pytest.param(_silent, 504, "timeout", id="timeout"),
        pytest.param(answering(b"HTTP/1.1 2OO OK\r\n\r\n"), 502, "connection", id="status-line"),
        pytest.param(_oversized_headers, 502, "connection", id="oversized-headers"),
    ],
)
async def test_a_call_the_upstream_never_answered_is_captured_and_marks_nothing(
    tmp_path: Path, database_url: str, handler: Handler, status: int, category: str
) -> None:
    async with raw_server(handler) as (origin, _):
        settings = _settings(tmp_path, database_url, f"http://{origin.host}:{origin.port}")
        response, registry = await _call_then_shut_down(settings, "r-unanswered")
    assert response.status_code == status
    assert _capture_failures(registry) == 0
    assert registry.get_sample_value("ledger_proxy_captures_total") == 1
    assert registry.get_sample_value(
        "ledger_proxy_upstream_failures_total", {"category": category}
    ) == (1)
    [record], gaps = await _stored(settings, "r-unanswered")
    assert (record["status_code"], record["error_category"]) == (None, category)
    assert record["response_source"] == "local"
    assert "model_call_capture_incomplete" not in gaps


async def test_an_answer_over_the_capture_limit_marks_the_rollout_incomplete(
    tmp_path: Path, database_url: str
) -> None:
    async with raw_server(answering(_TOO_LARGE)) as (origin, _):
        settings = _settings(tmp_path, database_url, f"http://{origin.host}:{origin.port}")
        response, registry = await _call_then_shut_down(settings, "r-large")
    assert response.status_code == 200
    assert response.content == _LARGE
    assert registry.get_sample_value(
        "ledger_proxy_capture_failures_total", {"reason": "response_too_large"}
    ) == (1)
    assert _capture_failures(registry) == 1
    [record], gaps = await _stored(settings, "r-large")
    assert (record["status_code"], record["response"], record["response_raw"]) == (200, None, None)
    assert "model_call_capture_incomplete" in gaps


def _chat_answer(model: str, content: str) -> bytes:
    body = json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(body) + body


async def test_a_nul_the_views_would_write_to_a_column_is_not_captured(
    tmp_path: Path, database_url: str
) -> None:
    """PostgreSQL's text cannot hold a NUL: one in a string the capture view keeps as a column
    (the response's ``model``) would stop the views at that event, so the recorder refuses it,
    as it refuses NaN. In a payload's content the log keeps it (escaped) and nothing stops."""
    async with raw_server(answering(_chat_answer("m\x00x", "fine"))) as (origin, _):
        settings = _settings(tmp_path, database_url, f"http://{origin.host}:{origin.port}")
        refused, registry = await _call_then_shut_down(settings, "r-nul-column")
    assert refused.status_code == 200
    assert registry.get_sample_value(
        "ledger_proxy_capture_failures_total", {"reason": "http_422"}
    ) == (1)
    # The capture lost, the rollout is marked incomplete, as for any failed capture.
    assert await _stored(settings, "r-nul-column") == ([], ["model_call_capture_incomplete"])
    async with raw_server(answering(_chat_answer("m", "a \x00 b"))) as (origin, _):
        settings = _settings(tmp_path, database_url, f"http://{origin.host}:{origin.port}")
        kept, registry = await _call_then_shut_down(settings, "r-nul-content")
    assert kept.status_code == 200
    assert _capture_failures(registry) == 0
    [record], gaps = await _stored(settings, "r-nul-content")
    assert record["model"] == "m" and gaps == []
