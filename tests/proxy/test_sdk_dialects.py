"""The real OpenAI and Anthropic SDKs through the proxy, every dialect, streaming or not.

Each call's answer reaches the SDK as the upstream sent it, and its capture is exactly what the
ledger's own derivation gives for the exchange the upstream had (``expected_record``), plus the
facts checked by hand: tool calls, reasoning, cache tokens, the model_call_id header.
"""

from __future__ import annotations

import uuid
from typing import Any

import anthropic
import openai
import pytest

from ledger.gym.dialects import MODEL_CALL_ID_HEADER
from tests.proxy.support import (
    CLIENT_KEY,
    UPSTREAM_KEY,
    Proxy,
    assert_sane_timings,
    expected_record,
    upstream_request_for,
    wait_for_calls,
)
from tests.support.fake_upstream import TEXT_PIECES, THOUGHT

# Real server and upstream processes (tests/proxy/conftest.py).
pytestmark = pytest.mark.slow

TEXT = "".join(TEXT_PIECES)
PATHS = {
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "messages": "/v1/messages",
}


def _openai(proxy: Proxy, rollout_id: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=proxy.rollout_url(rollout_id) + "/v1", api_key=CLIENT_KEY, max_retries=0
    )


def _anthropic(proxy: Proxy, rollout_id: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=proxy.rollout_url(rollout_id), api_key=CLIENT_KEY, max_retries=0
    )


def _call(
    proxy: Proxy, rollout_id: str, dialect: str, scenario: str, stream: bool, marker: str
) -> tuple[str, dict[str, Any]]:
    """Make the call with the SDK; return the model_call_id header and what the SDK parsed.
    The client is closed after it: one left open keeps its pooled socket until the garbage
    collector finds it, in whichever test runs then (filterwarnings = error fails that one)."""
    if dialect in ("chat", "responses"):
        with _openai(proxy, rollout_id) as client:
            return _call_openai(client, dialect, scenario, stream, marker)
    with _anthropic(proxy, rollout_id) as client_a:
        return _call_messages(client_a, scenario, stream, marker)


def _call_openai(
    client: openai.OpenAI, dialect: str, scenario: str, stream: bool, marker: str
) -> tuple[str, dict[str, Any]]:
    if dialect == "chat":
        messages: Any = [{"role": "user", "content": marker}]
        if not stream:
            raw = client.chat.completions.with_raw_response.create(
                model=scenario, messages=messages
            )
            completion = raw.parse()
            message = completion.choices[0].message
            calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]  # type: ignore[union-attr]
            return raw.headers[MODEL_CALL_ID_HEADER], {"text": message.content, "tools": calls}
        chunks = client.chat.completions.create(
            model=scenario, messages=messages, stream=True, stream_options={"include_usage": True}
        )
        header = chunks.response.headers[MODEL_CALL_ID_HEADER]
        text, arguments, usage = "", "", None
        for chunk in chunks:
            if chunk.usage is not None:
                usage = chunk.usage.total_tokens
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for tool in choice.delta.tool_calls or []:
                    arguments += (tool.function.arguments or "") if tool.function else ""
        return header, {"text": text or None, "arguments": arguments, "usage": usage}
    if not stream:
        raw_response = client.responses.with_raw_response.create(model=scenario, input=marker)
        response = raw_response.parse()
        kinds = [item.type for item in response.output]
        return raw_response.headers[MODEL_CALL_ID_HEADER], {
            "text": response.output_text or None,
            "kinds": kinds,
        }
    events = client.responses.create(model=scenario, input=marker, stream=True)
    header = events.response.headers[MODEL_CALL_ID_HEADER]
    names = [event.type for event in events]
    return header, {"events": names}


def _call_messages(
    client_a: anthropic.Anthropic, scenario: str, stream: bool, marker: str
) -> tuple[str, dict[str, Any]]:
    messages: Any = [{"role": "user", "content": marker}]
    if not stream:
        raw_message = client_a.messages.with_raw_response.create(
            model=scenario, max_tokens=64, messages=messages
        )
        message_a = raw_message.parse()
        return raw_message.headers[MODEL_CALL_ID_HEADER], {
            "kinds": [block.type for block in message_a.content],
            "stop": message_a.stop_reason,
        }
    events_a = client_a.messages.create(
        model=scenario, max_tokens=64, messages=messages, stream=True
    )
    header = events_a.response.headers[MODEL_CALL_ID_HEADER]
    return header, {"events": [event.type for event in events_a]}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("scenario", ["plain", "tools", "reasoning"])
@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
def test_sdk_call_is_answered_and_captured(
    proxy: Proxy, dialect: str, scenario: str, stream: bool
) -> None:
    rollout_id = f"sdk-{dialect}-{scenario}-{int(stream)}-{uuid.uuid4().hex[:6]}"
    marker = f"marker-{uuid.uuid4().hex}"
    header, seen = _call(proxy, rollout_id, dialect, scenario, stream, marker)

    # What the SDK parsed is the fake upstream's answer.
    if dialect == "chat" and not stream:
        assert seen["text"] == (None if scenario == "tools" else TEXT)
    if dialect == "chat" and stream:
        assert seen["usage"] == 18
        assert seen["text"] == (None if scenario == "tools" else TEXT)
    if dialect == "responses" and stream:
        assert seen["events"][0] == "response.created"
        assert seen["events"][-1] == "response.completed"
    if dialect == "messages" and stream:
        assert seen["events"][0] == "message_start"
        assert seen["events"][-1] == "message_stop"

    [record] = wait_for_calls(proxy, rollout_id, 1)
    assert record["model_call_id"] == header
    path = PATHS[dialect]
    received = upstream_request_for(proxy, path, marker)
    assert record == expected_record(record, path=path, request_body=received["body"])
    assert_sane_timings(record)

    # The derived facts, by hand.
    assert record["model_ref"] == {"type": "responses_api_models", "name": "fake"}
    assert (record["dialect"], record["status_code"], record["error_category"]) == (
        dialect,
        200,
        None,
    )
    assert record["model"] == scenario
    assert record["request"]["model"] == scenario
    if stream:
        assert record["response_raw"] is not None
        assert record["latency_ttft_ms"] is not None
    else:
        assert record["response_raw"] is None
    if scenario == "tools":
        [tool] = record["tool_calls"]
        assert (tool["name"], tool["arguments"]) == ("get_weather", {"city": "Paris"})
    else:
        assert record["tool_calls"] == []
    if scenario == "reasoning":
        assert record["reasoning_content"] == THOUGHT
        if dialect == "messages":
            assert (record["cached_tokens"], record["cache_creation_tokens"]) == (7, 3)
            assert record["tokens_in"] == 12 + 7 + 3  # Anthropic's cache counts fold in
        else:
            assert (record["cached_tokens"], record["tokens_reasoning"]) == (8, 4)
            assert record["tokens_in"] == 12
        assert record["cache_hit"] is True
    assert record["tokens_out"] == 6

    # The upstream got the configured key, never the client's, and no rollout prefix.
    headers = dict(received["headers"])
    if dialect == "messages":
        assert headers["x-api-key"] == UPSTREAM_KEY
    else:
        assert headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert CLIENT_KEY not in str(received["headers"])
    assert received["path"] == path
