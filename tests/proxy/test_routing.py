"""Routing, correlation and what the proxy never lets through: hostile rollout ids, unprefixed
calls, unknown upstreams, secrets; concurrency into one rollout; the mirror file."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from ledger.gym.capture_lines import parse_capture_text_strict
from ledger.gym.dialects import MODEL_CALL_ID_HEADER
from ledger.gym.ids import is_valid_rollout_id
from ledger.gym.model_calls import build_model_call_record
from tests.proxy.support import (
    CLIENT_KEY,
    UPSTREAM_KEY,
    Proxy,
    all_events,
    captured_ids,
    metric,
    wait_for_calls,
)
from tests.support.fake_upstream import plan_for

# Real server and upstream processes (tests/proxy/conftest.py).
pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"

# A segment, and the id as the 400 names it (percent-decoded, escaped by repr).
HOSTILE_IDS = [
    pytest.param("a%0d%0ab", r"'a\r\nb'", id="crlf"),
    pytest.param("x%0d%0ax-injected:%201", r"'x\r\nx-injected: 1'", id="crlf-header"),
    pytest.param("a%2Fb", "'a/b'", id="encoded-slash"),
    pytest.param("..%2F..%2Fescape", "'../../escape'", id="dot-dot"),
    pytest.param("r%C3%B6llout", "'r\u00f6llout'", id="unicode"),
    pytest.param("r%FFllout", r"'r\\xffllout'", id="not-utf8"),
    pytest.param("%2Ehidden", "'.hidden'", id="leading-dot"),
    pytest.param("a%00b", r"'a\x00b'", id="nul"),
    pytest.param("a%20b", "'a b'", id="space"),
    pytest.param("x" * 201, "'" + "x" * 200 + "'", id="too-long"),
]


def _mirror_names(proxy: Proxy) -> list[str]:
    directory = proxy.mirror_dir / "model-calls"
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


@pytest.mark.parametrize(("segment", "shown"), HOSTILE_IDS)
@pytest.mark.parametrize("path", [CHAT, "/v1/messages"])
def test_hostile_rollout_id_is_a_400_naming_it(
    proxy: Proxy, segment: str, shown: str, path: str
) -> None:
    marker = uuid.uuid4().hex
    refused = metric(proxy, "ledger_proxy_refused_calls_total")
    upstream_failures = metric(proxy, "ledger_proxy_upstream_failures_total")
    url = httpx.URL(f"{proxy.url}/ng-rollout/{segment}{path}")
    body = {"model": "plain", "max_tokens": 8, "messages": [{"role": "user", "content": marker}]}
    response = httpx.post(url, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(f"Invalid rollout id: {shown} (Gym's charset ")
    assert "\r" not in error["message"] and "\n" not in error["message"]
    if path == "/v1/messages":
        assert response.json()["type"] == "error"  # Anthropic's shape, for its SDK
    assert MODEL_CALL_ID_HEADER not in response.headers
    # Counted as the client's mistake, not the upstream's.
    assert metric(proxy, "ledger_proxy_refused_calls_total") == refused + 1
    assert metric(proxy, "ledger_proxy_upstream_failures_total") == upstream_failures
    # Nothing went upstream, nothing was captured or named after the id, nothing logged it.
    assert not [r for r in proxy.upstream.requests() if marker in r["body"]]
    assert all(is_valid_rollout_id(name.split(".capture.")[0]) for name in _mirror_names(proxy))
    assert "injected" not in proxy.server.log_path.read_text()


def test_literal_slash_in_the_rollout_segment_is_refused(proxy: Proxy) -> None:
    response = httpx.post(f"{proxy.url}/ng-rollout/a/b{CHAT}", json={"model": "plain"})
    assert response.status_code == 404
    assert "expected" in response.json()["error"]["message"]


def test_unprefixed_calls_are_forwarded_and_never_captured(proxy: Proxy) -> None:
    before = len(captured_ids(proxy))
    with openai.OpenAI(base_url=proxy.url + "/v1", api_key=CLIENT_KEY, max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="plain", messages=[{"role": "user", "content": "hi"}]
        )
    assert raw.parse().choices[0].message.content == "Hello from the fake upstream."
    assert MODEL_CALL_ID_HEADER not in raw.headers
    named = httpx.post(f"{proxy.url}/upstreams/fake{CHAT}", json={"model": "plain"})
    assert named.status_code == 200
    # A prefixed call outside the three dialects is forwarded, not captured.
    other = httpx.post(f"{proxy.url}/ng-rollout/r-other/v1/embeddings", json={"model": "plain"})
    assert other.status_code == 404  # the fake upstream's own answer
    assert "no route /v1/embeddings" in other.text
    assert len(captured_ids(proxy)) == before


def test_unknown_upstream_is_a_404_naming_the_configured_ones(proxy: Proxy) -> None:
    refused = metric(proxy, "ledger_proxy_refused_calls_total")
    response = httpx.post(
        f"{proxy.url}/ng-rollout/r1/upstreams/nope/v1/messages", json={"model": "plain"}
    )
    assert response.status_code == 404
    assert response.json()["type"] == "error"  # Anthropic's error shape on /v1/messages
    assert "fake, dead" in response.json()["error"]["message"]
    assert metric(proxy, "ledger_proxy_refused_calls_total") == refused + 1


def test_named_upstream_route_is_captured_with_that_model_ref(proxy: Proxy) -> None:
    rollout_id = f"named-{uuid.uuid4().hex[:8]}"
    response = httpx.post(
        f"{proxy.url}/ng-rollout/{rollout_id}/upstreams/fake{CHAT}?trace=1",
        json={"model": "plain", "messages": []},
        headers={"x-session-id": "session-7"},
    )
    assert response.status_code == 200
    [record] = wait_for_calls(proxy, rollout_id, 1)
    assert record["model_ref"]["name"] == "fake"
    assert record["client_session_id"] == "session-7"
    assert record["model_call_id"] == response.headers[MODEL_CALL_ID_HEADER]


def test_the_upstream_key_is_never_stored_logged_or_mirrored(proxy: Proxy) -> None:
    rollout_id = f"secret-{uuid.uuid4().hex[:8]}"
    response = httpx.post(
        f"{proxy.rollout_url(rollout_id)}{CHAT}",
        json={"model": "plain", "messages": []},
        headers={"authorization": f"Bearer {CLIENT_KEY}"},
    )
    assert response.status_code == 200
    wait_for_calls(proxy, rollout_id, 1)
    events = json.dumps(all_events(proxy))
    assert len(events) > 1000
    assert UPSTREAM_KEY not in events
    assert UPSTREAM_KEY not in proxy.server.log_path.read_text()
    for path in proxy.mirror_dir.rglob("*"):
        if path.is_file():
            assert UPSTREAM_KEY.encode() not in path.read_bytes()


@pytest.mark.parametrize("dialect_path", [CHAT, "/v1/responses", "/v1/messages"])
def test_stream_passes_through_byte_for_byte_chunk_by_chunk(
    proxy: Proxy, dialect_path: str
) -> None:
    body = {"model": "tools", "stream": True, "max_tokens": 8, "messages": [], "input": "x"}
    plan = plan_for(dialect_path, body)
    chunks = []
    with httpx.stream(
        "POST", f"{proxy.rollout_url('bytes-' + uuid.uuid4().hex[:6])}{dialect_path}", json=body
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        chunks = list(response.iter_raw())
    assert b"".join(chunks) == plan.sent()
    assert len(chunks) > 1  # relayed as it arrived, not gathered into one body


async def test_concurrent_calls_into_one_rollout_each_get_one_capture(proxy: Proxy) -> None:
    rollout_id = f"concurrent-{uuid.uuid4().hex[:8]}"
    client = openai.AsyncOpenAI(
        base_url=proxy.rollout_url(rollout_id) + "/v1", api_key=CLIENT_KEY, max_retries=0
    )

    async def one(number: int) -> str:
        messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": f"call {number}"}]
        if number % 2:
            stream = await client.chat.completions.create(
                model="plain", messages=messages, stream=True
            )
            header = stream.response.headers[MODEL_CALL_ID_HEADER]
            async for _ in stream:
                pass
            return header
        raw = await client.chat.completions.with_raw_response.create(
            model="plain",
            messages=messages,
        )
        return raw.headers[MODEL_CALL_ID_HEADER]

    ids = await asyncio.gather(*(one(n) for n in range(24)))
    await client.close()
    records = await asyncio.to_thread(wait_for_calls, proxy, rollout_id, 24)
    assert sorted(r["model_call_id"] for r in records) == sorted(ids)
    assert [r["call_index"] for r in records] == list(range(24))


def test_mirror_file_reads_back_with_the_capture_line_parser(proxy: Proxy) -> None:
    rollout_id = f"mirror-{uuid.uuid4().hex[:8]}"
    for model, stream in [("plain", False), ("tools", True), ("reasoning", True)]:
        response = httpx.post(
            proxy.rollout_url(rollout_id) + "/v1/messages",
            json={"model": model, "max_tokens": 8, "messages": [], "stream": stream},
        )
        assert response.status_code == 200
    records = wait_for_calls(proxy, rollout_id, 3)
    path: Path = proxy.mirror_dir / "model-calls" / f"{rollout_id}.capture.jsonl"
    deadline = time.monotonic() + 30
    while not (path.exists() and len(path.read_text().splitlines()) == 3):
        assert time.monotonic() < deadline, "the mirror did not catch up"
        time.sleep(0.02)  # poll
    lines = parse_capture_text_strict(path.read_bytes().splitlines())
    rebuilt = [
        build_model_call_record(line, i).model_dump(mode="json") for i, line in enumerate(lines)
    ]
    assert rebuilt == records
    assert (
        json.loads(path.read_text().splitlines()[0])["model_call_id"] == records[0]["model_call_id"]
    )
