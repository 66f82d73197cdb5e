"""SSE blocks, terminal events and stream reassembly (contract §2.4, §2.6), case by case."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledger.gym.dialects import Dialect
from ledger.gym.sse import is_event_stream, parse_stream, stream_terminal
from ledger.gym.stream_reassembly import reassemble_stream


def sse(*blocks: tuple[str | None, Any], crlf: bool = False) -> str:
    parts = []
    for event, data in blocks:
        text = data if isinstance(data, str) else json.dumps(data)
        parts.append((f"event: {event}\n" if event else "") + f"data: {text}\n\n")
    joined = "".join(parts)
    return joined.replace("\n", "\r\n") if crlf else joined


def test_blocks_split_on_blank_lines_and_fields_normalise() -> None:
    blocks = parse_stream('event:a\ndata:{"x": 1}\n\n: comment\n\nevent: b\ndata: 1\ndata: 2')
    assert [(b.event, b.data) for b in blocks] == [("a", '{"x": 1}'), (None, None), ("b", "1\n2")]
    assert blocks[0].json_object() == {"x": 1}
    assert blocks[2].json_object() is None  # "1\n2" is not a JSON object


def test_crlf_streams_read_like_lf_streams() -> None:
    text = sse(("message_stop", {"type": "message_stop"}))
    assert parse_stream(text) == parse_stream(text.replace("\n", "\r\n"))


@pytest.mark.parametrize(
    ("dialect", "text", "terminal"),
    [
        ("responses", sse(("response.completed", {})), "complete"),
        ("responses", sse(("response.incomplete", {})), "incomplete"),
        ("responses", sse(("response.failed", {})), "error"),
        ("responses", sse(("error", {})), "error"),
        ("responses", sse(("response.output_text.delta", {})), None),
        ("chat", sse((None, "[DONE]")), "complete"),
        ("chat", sse((None, {"error": {"message": "x"}})), "error"),
        ("chat", sse((None, {"error": None, "choices": []})), None),
        ("chat", sse(("error", {})), "error"),
        ("messages", sse(("message_stop", {})), "complete"),
        ("messages", sse(("error", {})), "error"),
        ("messages", sse(("message_delta", {})), None),
        # The first terminal counts: an error before [DONE] is an error.
        ("chat", sse((None, {"error": {"m": 1}}), (None, "[DONE]")), "error"),
    ],
)
def test_terminal_events(dialect: Dialect, text: str, terminal: str | None) -> None:
    assert stream_terminal(dialect, parse_stream(text)) == terminal


def test_event_stream_content_type() -> None:
    assert is_event_stream("text/event-stream; charset=utf-8")
    assert is_event_stream(" Text/Event-Stream")
    assert not is_event_stream("application/json")
    assert not is_event_stream(None)


def test_chat_reassembly_merges_content_reasoning_tools_usage() -> None:
    text = sse(
        (
            None,
            {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        ),
        (None, {"choices": [{"index": 0, "delta": {"content": "Hel", "reasoning": "th"}}]}),
        (None, {"choices": [{"index": 0, "delta": {"content": "lo", "reasoning_content": "ink"}}]}),
        (
            None,
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 1,
                                    "id": "t2",
                                    "function": {"name": "g", "arguments": "{"},
                                },
                                {
                                    "index": 0,
                                    "id": "t1",
                                    "function": {"name": "f", "arguments": ""},
                                },
                            ]
                        },
                    }
                ]
            },
        ),
        (
            None,
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "}"}}]},
                    }
                ]
            },
        ),
        (None, {"choices": [{"index": 1, "delta": {"content": "other choice"}}]}),
        (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": ""}]}),
        (None, {"choices": [], "usage": {"total_tokens": 3}}),
        (None, "[DONE]"),
    )
    assert reassemble_stream("chat", parse_stream(text)) == {
        "object": "chat.completion",
        "model": "m",
        "id": "c1",
        "usage": {"total_tokens": 3},
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Hello",
                    "reasoning_content": "think",
                    "tool_calls": [
                        {
                            "type": "function",
                            "id": "t1",
                            "function": {"name": "f", "arguments": ""},
                        },
                        {
                            "type": "function",
                            "id": "t2",
                            "function": {"name": "g", "arguments": "{}"},
                        },
                    ],
                },
            }
        ],
    }


def test_chat_without_any_choice_is_none_and_empty_content_is_null() -> None:
    assert (
        reassemble_stream("chat", parse_stream(sse((None, {"usage": {}}), (None, "[DONE]"))))
        is None
    )
    text = sse((None, {"choices": [{"delta": {"content": ""}}]}))
    result = reassemble_stream("chat", parse_stream(text))
    assert result is not None
    assert result["choices"][0]["message"]["content"] is None


def test_responses_reassembly_prefers_the_final_event() -> None:
    created = {"type": "response.created", "response": {"id": "r", "status": "in_progress"}}
    done = {"type": "response.completed", "response": {"id": "r", "status": "completed"}}
    later = {"type": "response.output_text.done", "response": {"id": "r", "status": "late"}}
    blocks = parse_stream(
        sse(("response.created", created), ("response.completed", done), (None, later))
    )
    assert reassemble_stream("responses", blocks) == {"id": "r", "status": "completed"}
    # No final event: the last event carrying a response.
    truncated = parse_stream(sse(("response.created", created), ("x", {"delta": "a"})))
    assert reassemble_stream("responses", truncated) == {"id": "r", "status": "in_progress"}
    assert reassemble_stream("responses", parse_stream(sse(("x", {"delta": "a"})))) is None


def test_messages_reassembly_blocks_deltas_usage() -> None:
    start = {
        "type": "message_start",
        "message": {
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 5, "cache_read_input_tokens": 2},
        },
    }
    text = sse(
        ("message_start", start),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "hm"},
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "tool_use", "id": "tu", "name": "f", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": '{"a": '},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": "1}"},
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "text_delta", "text": "hi"},
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 3,
                "content_block": {"type": "tool_use", "id": "bad", "name": "g", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "input_json_delta", "partial_json": "{nope"},
            },
        ),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 9},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    )
    assert reassemble_stream("messages", parse_stream(text)) == {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "hm"},
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "tu", "name": "f", "input": {"a": 1}},
            {"type": "tool_use", "id": "bad", "name": "g", "input": {"_raw": "{nope"}},
        ],
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 2, "output_tokens": 9},
    }
    assert reassemble_stream("messages", parse_stream(sse(("ping", {"type": "ping"})))) is None
