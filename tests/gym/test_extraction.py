"""Tool calls, reasoning and argument coercion (§2.9) for each dialect."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.gym.extraction import (
    ToolCall,
    coerce_arguments,
    extract_reasoning,
    extract_tool_calls,
    extract_tool_calls_and_reasoning,
)

# --- argument coercion ---------------------------------------------------------------------


def test_object_arguments_are_kept_as_is() -> None:
    assert coerce_arguments({"city": "Paris", "days": 3}) == {"city": "Paris", "days": 3}


def test_json_string_arguments_are_parsed() -> None:
    assert coerce_arguments('{"city": "Paris", "days": 3}') == {"city": "Paris", "days": 3}


@pytest.mark.parametrize("text", ['{"city": "Par', "not json", "", "{'a': 1}"])
def test_unparseable_string_is_kept_raw(text: str) -> None:
    assert coerce_arguments(text) == {"_raw": text}


@pytest.mark.parametrize("text", ["[1, 2]", "5", '"city"', "null", '{"x": NaN}'])
def test_string_that_is_not_a_json_object_is_kept_raw(text: str) -> None:
    assert coerce_arguments(text) == {"_raw": text}


@pytest.mark.parametrize("value", [None, 5, 2.5, True, ["a"], ("a",)])
def test_other_arguments_become_empty_object(value: object) -> None:
    assert coerce_arguments(value) == {}


# --- Responses -----------------------------------------------------------------------------

RESPONSES_BODY: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "output": [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "First think."},
                {"type": "summary_text", "text": "Then act."},
            ],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_abc",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        "not an item",
        {"type": "function_call", "id": "fc_2", "name": "lookup", "arguments": {"q": "x"}},
        {"type": "function_call", "id": "fc_3", "call_id": "", "name": "broken", "arguments": "{"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It is sunny."}],
        },
    ],
}


def test_responses_function_calls() -> None:
    assert extract_tool_calls(RESPONSES_BODY) == [
        ToolCall(call_id="call_abc", name="get_weather", arguments={"city": "Paris"}),
        # call_id missing: the item id stands in
        ToolCall(call_id="fc_2", name="lookup", arguments={"q": "x"}),
        # empty call_id is as good as missing
        ToolCall(call_id="fc_3", name="broken", arguments={"_raw": "{"}),
    ]


def test_responses_reasoning_summaries_joined_with_newline() -> None:
    assert extract_reasoning(RESPONSES_BODY) == "First think.\nThen act."


def test_responses_reasoning_from_several_items_and_skipping_non_text() -> None:
    body = {
        "output": [
            {"type": "reasoning", "summary": [{"text": "a"}, {"text": 5}, "b", {"text": ""}]},
            {"type": "reasoning", "summary": "not a list"},
            {"type": "reasoning", "summary": [{"text": "c"}]},
        ]
    }
    assert extract_reasoning(body) == "a\nc"


def test_responses_without_reasoning_gives_null() -> None:
    body = {"output": [{"type": "reasoning", "summary": []}, {"type": "message", "content": []}]}
    assert extract_tool_calls_and_reasoning(body) == ([], None)


def test_responses_function_call_without_arguments_gets_empty_object() -> None:
    body = {"output": [{"type": "function_call", "call_id": "c1", "name": "noop"}]}
    assert extract_tool_calls(body) == [ToolCall(call_id="c1", name="noop", arguments={})]


def test_non_string_names_and_ids_become_null() -> None:
    body = {"output": [{"type": "function_call", "call_id": 7, "id": 8, "name": ["x"]}]}
    assert extract_tool_calls(body) == [ToolCall(call_id=None, name=None, arguments={})]


# --- Chat Completions ----------------------------------------------------------------------

CHAT_BODY: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Need the weather.",
                "reasoning": "ignored because reasoning_content wins",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "oslo"},
                    },
                    {"id": "call_3", "type": "function"},
                    "junk",
                ],
            },
        }
    ],
}


def test_chat_tool_calls() -> None:
    assert extract_tool_calls(CHAT_BODY) == [
        ToolCall(call_id="call_1", name="get_weather", arguments={"city": "Oslo"}),
        ToolCall(call_id="call_2", name="get_time", arguments={"_raw": "oslo"}),
        ToolCall(call_id="call_3", name=None, arguments={}),
    ]


def test_chat_reasoning_content_wins() -> None:
    assert extract_reasoning(CHAT_BODY) == "Need the weather."


def test_chat_reasoning_field_when_no_reasoning_content() -> None:
    body = {"choices": [{"message": {"content": "hi", "reasoning": "short thought"}}]}
    assert extract_reasoning(body) == "short thought"


def test_chat_empty_reasoning_content_falls_back_to_reasoning() -> None:
    body = {"choices": [{"message": {"reasoning_content": "", "reasoning": "r"}}]}
    assert extract_reasoning(body) == "r"


def test_chat_tool_calls_of_every_choice() -> None:
    body = {
        "choices": [
            {"message": {"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {}}}]}},
            {"message": {"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": 3}}]}},
            {"message": None},
            "junk",
        ]
    }
    assert extract_tool_calls(body) == [
        ToolCall(call_id="a", name="f", arguments={}),
        ToolCall(call_id="b", name="g", arguments={}),
    ]


def test_chat_without_tools_or_reasoning() -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": "Hello"}}]}
    assert extract_tool_calls_and_reasoning(body) == ([], None)


# --- Anthropic Messages --------------------------------------------------------------------

MESSAGES_BODY: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "Let me check.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "gym"}},
        {"type": "tool_use", "id": "toolu_2", "name": "noop", "input": {}},
        {"type": "tool_use", "id": "toolu_3", "name": "stringly", "input": '{"a": 1}'},
        {"type": "tool_use", "id": "toolu_4", "name": "nothing"},
        {"type": "thinking", "thinking": "Done."},
    ],
}


def test_anthropic_tool_use_blocks() -> None:
    assert extract_tool_calls(MESSAGES_BODY) == [
        ToolCall(call_id="toolu_1", name="search", arguments={"q": "gym"}),
        ToolCall(call_id="toolu_2", name="noop", arguments={}),
        ToolCall(call_id="toolu_3", name="stringly", arguments={"a": 1}),
        ToolCall(call_id="toolu_4", name="nothing", arguments={}),
    ]


def test_anthropic_thinking_blocks_joined() -> None:
    # redacted_thinking carries no readable `thinking` string, so it contributes nothing.
    assert extract_reasoning(MESSAGES_BODY) == "Let me check.\nDone."


def test_anthropic_redacted_thinking_with_a_thinking_string_counts() -> None:
    body = {"content": [{"type": "redacted_thinking", "thinking": "visible"}]}
    assert extract_reasoning(body) == "visible"


def test_anthropic_text_only() -> None:
    body = {"content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn"}
    assert extract_tool_calls_and_reasoning(body) == ([], None)


# --- not a response ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response",
    [None, "text", [], {}, {"output": "x", "choices": {}, "content": "hello"}],
)
def test_nothing_to_extract(response: object) -> None:
    assert extract_tool_calls_and_reasoning(response) == ([], None)
