"""Upstream errors, timeouts, cut and truncated streams, clients that leave, and captures that
fail: the client always gets what the upstream gave, and the capture says what happened."""

from __future__ import annotations

import json
import time
import uuid

import anthropic
import httpx
import openai
import pytest

from ledger.gym.dialects import MODEL_CALL_ID_HEADER
from tests.proxy.support import (
    CLIENT_KEY,
    MAX_REQUEST_BYTES,
    Proxy,
    assert_sane_timings,
    attachment,
    expected_record,
    metric,
    upstream_request_for,
    wait_for_calls,
)
from tests.support.fake_upstream import LARGE_TEXT_BYTES, plan_for

# Real server and upstream processes (tests/proxy/conftest.py).
pytestmark = pytest.mark.slow

PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def _rollout(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _body(dialect: str, model: str, marker: str, *, stream: bool = False) -> dict[str, object]:
    if dialect == "responses":
        return {"model": model, "input": marker, "stream": stream}
    body: dict[str, object] = {
        "model": model,
        "messages": [{"role": "user", "content": marker}],
        "stream": stream,
    }
    if dialect == "messages":
        body["max_tokens"] = 64
    return body


@pytest.mark.parametrize(
    ("scenario", "status", "category"),
    [("rate-limit", 429, "rate_limit"), ("server-error", 500, "upstream_error")],
)
def test_upstream_error_status_reaches_the_sdk_and_the_capture(
    proxy: Proxy, scenario: str, status: int, category: str
) -> None:
    rollout_id = _rollout(scenario)
    with (
        openai.OpenAI(
            base_url=proxy.rollout_url(rollout_id) + "/v1", api_key=CLIENT_KEY, max_retries=0
        ) as chat,
        pytest.raises(openai.APIStatusError) as openai_error,
    ):
        chat.chat.completions.create(model=scenario, messages=[{"role": "user", "content": "a"}])
    assert openai_error.value.status_code == status
    with (
        anthropic.Anthropic(
            base_url=proxy.rollout_url(rollout_id), api_key=CLIENT_KEY, max_retries=0
        ) as messages,
        pytest.raises(anthropic.APIStatusError) as anthropic_error,
    ):
        messages.messages.create(
            model=scenario, max_tokens=8, messages=[{"role": "user", "content": "b"}]
        )
    assert anthropic_error.value.status_code == status
    records = wait_for_calls(proxy, rollout_id, 2)
    for record, dialect in zip(records, ["chat", "messages"], strict=True):
        assert (record["dialect"], record["status_code"]) == (dialect, status)
        assert record["error_category"] == category
        # The error body parses as an object: kept as the response, no raw copy.
        assert record["response"] == json.loads(
            plan_for(PATHS[dialect], {"model": scenario}).sent()
        )
        assert record["response_raw"] is None


def test_upstream_timeout_is_a_504_and_a_timeout_capture(proxy: Proxy) -> None:
    rollout_id = _rollout("slow")
    with (
        openai.OpenAI(
            base_url=proxy.rollout_url(rollout_id) + "/v1", api_key=CLIENT_KEY, max_retries=0
        ) as client,
        pytest.raises(openai.APIStatusError) as error,
    ):
        client.chat.completions.with_raw_response.create(
            model="slow", messages=[{"role": "user", "content": "a"}]
        )
    assert error.value.status_code == 504
    assert "did not answer" in str(error.value)
    header = error.value.response.headers[MODEL_CALL_ID_HEADER]
    [record] = wait_for_calls(proxy, rollout_id, 1)
    assert record["model_call_id"] == header
    assert (record["status_code"], record["error_category"]) == (None, "timeout")
    assert (record["response_source"], record["local_response_reason"]) == (
        "local",
        "upstream_timeout",
    )
    assert record["upstream_attempted"] is True
    assert record["response"] is None
    assert record["latency_total_ms"] >= 1000 * 0.9


def test_unreachable_upstream_is_a_502_and_a_connection_capture(proxy: Proxy) -> None:
    rollout_id = _rollout("dead")
    with (
        anthropic.Anthropic(
            base_url=proxy.rollout_url(rollout_id) + "/upstreams/dead",
            api_key=CLIENT_KEY,
            max_retries=0,
        ) as client,
        pytest.raises(anthropic.APIStatusError) as error,
    ):
        client.messages.create(
            model="plain", max_tokens=8, messages=[{"role": "user", "content": "a"}]
        )
    assert error.value.status_code == 502
    [record] = wait_for_calls(proxy, rollout_id, 1)
    assert record["model_ref"]["name"] == "dead"
    assert (record["status_code"], record["error_category"]) == (None, "connection")
    assert record["local_response_reason"] == "upstream_unreachable"


@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
def test_stream_without_terminal_event_is_stream_truncated(proxy: Proxy, dialect: str) -> None:
    rollout_id = _rollout(f"trunc-{dialect}")
    marker = uuid.uuid4().hex
    body = _body(dialect, "truncated", marker, stream=True)
    with httpx.stream(
        "POST", proxy.rollout_url(rollout_id) + PATHS[dialect], json=body, timeout=30
    ) as response:
        received = b"".join(response.iter_raw())
    plan = plan_for(PATHS[dialect], body)
    assert response.status_code == 200
    assert received == plan.sent()  # byte for byte, without the terminal event
    [record] = wait_for_calls(proxy, rollout_id, 1)
    assert record["error_category"] == "stream_truncated"
    assert record["response_raw"] == plan.sent().decode()
    request = upstream_request_for(proxy, PATHS[dialect], marker)
    assert record == expected_record(record, path=PATHS[dialect], request_body=request["body"])
    # The partial reconstruction is kept.
    assert record["response"] is not None
    if dialect == "chat":
        assert (
            record["response"]["choices"][0]["message"]["content"]
            == "Hello from the fake upstream."
        )
    if dialect == "responses":
        assert record["response"]["status"] == "in_progress"
    if dialect == "messages":
        assert record["response"]["content"][0]["text"] == "Hello from the fake upstream."


@pytest.mark.parametrize("dialect", ["chat", "messages"])
def test_stream_cut_by_the_upstream_is_cut_for_the_client_and_captured(
    proxy: Proxy, dialect: str
) -> None:
    rollout_id = _rollout(f"cut-{dialect}")
    marker = uuid.uuid4().hex
    body = _body(dialect, "cut", marker, stream=True)
    received: list[bytes] = []
    with pytest.raises(httpx.RemoteProtocolError):
        _read_stream(proxy.rollout_url(rollout_id) + PATHS[dialect], body, received)
    plan = plan_for(PATHS[dialect], body)
    assert b"".join(received) == plan.sent()
    [record] = wait_for_calls(proxy, rollout_id, 1)
    assert (record["status_code"], record["error_category"]) == (200, "stream_truncated")
    assert record["response_raw"] == plan.sent().decode()


def test_client_that_disconnects_mid_stream_leaves_a_capture_of_what_was_seen(
    proxy: Proxy,
) -> None:
    rollout_id = _rollout("gone")
    marker = uuid.uuid4().hex
    body = _body("chat", "stall", marker, stream=True)
    plan = plan_for(PATHS["chat"], body)
    client = httpx.Client(timeout=30)
    with client.stream(
        "POST", proxy.rollout_url(rollout_id) + PATHS["chat"], json=body
    ) as response:
        seen = b""
        for chunk in response.iter_raw():
            seen += chunk
            if seen == plan.sent():
                break  # the upstream now stalls; the client gives up
        header = response.headers[MODEL_CALL_ID_HEADER]
    client.close()
    [record] = wait_for_calls(proxy, rollout_id, 1)
    assert record["model_call_id"] == header
    assert (record["status_code"], record["error_category"]) == (200, "cancelled")
    assert record["response_raw"] == plan.sent().decode()
    assert record["response"]["choices"][0]["message"]["role"] == "assistant"
    assert_sane_timings(record)


def test_a_failed_capture_never_fails_the_response(proxy: Proxy) -> None:
    rollout_id = _rollout("nan")
    failures = metric(proxy, "ledger_proxy_capture_failures_total")
    # NaN is not JSON: the upstream accepts it, the ledger refuses to store it.
    content = b'{"model": "plain", "messages": [], "temperature": NaN}'
    response = httpx.post(
        proxy.rollout_url(rollout_id) + PATHS["chat"],
        content=content,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "Hello from the fake upstream."
    gaps = _wait_for_gap(proxy, rollout_id, "model_call_capture_incomplete")
    assert "model_call_capture_incomplete" in gaps
    assert metric(proxy, "ledger_proxy_capture_failures_total") == failures + 1


def test_response_over_the_capture_limit_is_passed_whole_and_marked_incomplete(
    proxy: Proxy,
) -> None:
    rollout_id = _rollout("large")
    response = httpx.post(
        proxy.rollout_url(rollout_id) + PATHS["chat"], json={"model": "large", "messages": []}
    )
    assert response.status_code == 200
    assert len(response.json()["text"]) == LARGE_TEXT_BYTES
    [record] = wait_for_calls(proxy, rollout_id, 1)
    assert (record["status_code"], record["response"], record["response_raw"]) == (200, None, None)
    assert "model_call_capture_incomplete" in _wait_for_gap(
        proxy, rollout_id, "model_call_capture_incomplete"
    )


def test_request_over_the_limit_is_refused_before_the_upstream(proxy: Proxy) -> None:
    rollout_id = _rollout("big-request")
    marker = uuid.uuid4().hex
    body = {
        "model": "plain",
        "messages": [{"role": "user", "content": marker * (MAX_REQUEST_BYTES // 16)}],
    }
    response = httpx.post(proxy.rollout_url(rollout_id) + PATHS["chat"], json=body)
    assert response.status_code == 413
    assert str(MAX_REQUEST_BYTES) in response.json()["error"]["message"]
    assert not [r for r in proxy.upstream.requests() if marker in r["body"]]
    assert httpx.get(f"{proxy.url}/v1/rollouts/{rollout_id}/model-calls").json()["calls"] == []


def _read_stream(url: str, body: dict[str, object], into: list[bytes]) -> None:
    with httpx.stream("POST", url, json=body, timeout=30) as response:
        into.extend(response.iter_raw())


def _wait_for_gap(proxy: Proxy, rollout_id: str, code: str) -> list[str]:
    deadline = time.monotonic() + 30
    while True:
        gaps = [gap["code"] for gap in attachment(proxy, rollout_id).get("gaps", [])]
        if code in gaps or time.monotonic() > deadline:
            return gaps
        time.sleep(0.02)  # poll
