"""Conversation items and whether Gym 0.7.0 accepts them as a ``NeMoGymResponseInputItem``.

Pure data, shared by the unit tests (our models) and the Gym leg (Gym's own TypeAdapter on the
same items must give the same verdicts)."""

from __future__ import annotations

from typing import Any

TOKENS = {"prompt_token_ids": [1], "generation_token_ids": [2], "generation_log_probs": [-0.5]}


def user(content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": content, **extra}


def output(part: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    text = {"type": "output_text", "text": "4", "annotations": []}
    return {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "content": [part if part is not None else text],
        **extra,
    }


def text_with(**fields: Any) -> dict[str, Any]:
    return {"type": "output_text", "text": "4", "annotations": [], **fields}


# (name, item, accepted by Gym 0.7.0?)
CASES: list[tuple[str, Any, bool]] = [
    ("user-string", user("hi"), True),
    ("user-text-part", user([{"type": "input_text", "text": "hi"}]), True),
    ("user-text-part-without-text", user([{"type": "input_text"}]), False),
    ("user-part-without-type", user([{"text": "hi"}]), False),
    ("user-image-without-detail", user([{"type": "input_image", "image_url": "http://x"}]), False),
    (
        "user-image",
        user([{"type": "input_image", "image_url": "http://x", "detail": "auto"}]),
        True,
    ),
    (
        "user-image-null-url",
        user([{"type": "input_image", "detail": "low", "image_url": None}]),
        True,
    ),
    ("user-image-bad-detail", user([{"type": "input_image", "detail": "zzz"}]), False),
    ("user-file-bare", user([{"type": "input_file"}]), True),
    ("user-file-bad-detail", user([{"type": "input_file", "detail": "auto"}]), False),
    ("user-audio-part", user([{"type": "input_audio", "input_audio": {"data": "x"}}]), False),
    ("user-video", user([{"type": "input_video", "video_url": "http://v"}]), True),
    ("user-video-dict", user([{"type": "input_video", "video_url": {"url": "http://v"}}]), True),
    (
        "user-video-two-sources",
        user([{"type": "input_video", "video_url": "a", "video": "b"}]),
        False,
    ),
    ("user-video-blank", user([{"type": "input_video", "video_url": " "}]), False),
    ("user-video-no-source", user([{"type": "input_video"}]), False),
    ("user-unknown-part", user([{"type": "bogus"}]), False),
    ("user-extra-key", user("hi", foo=1), True),
    ("user-bad-phase", user("hi", phase="x"), False),
    ("user-int-content", user(5), True),  # Gym's permissive fallback takes it
    ("tool-role", {"role": "tool", "content": "hi"}, True),  # the same fallback
    ("role-int", {"role": 5, "content": "x"}, True),
    (
        "input-message-with-status",
        {
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_text", "text": "x"}],
        },
        True,
    ),
    (
        "developer-list-bad-status",
        {"role": "developer", "content": [{"type": "input_text", "text": "x"}], "status": "zzz"},
        True,
    ),
    ("typed-message-without-role", {"type": "message", "content": "x"}, False),
    ("assistant-output", output(), True),
    ("assistant-output-without-id", {**output(), "id": None}, False),
    (
        "assistant-output-missing-id",
        {"type": "message", "role": "assistant", "content": [text_with()]},
        False,
    ),
    ("assistant-output-int-id", {**output(), "id": 5}, False),
    ("assistant-output-without-annotations", output({"type": "output_text", "text": "4"}), False),
    ("assistant-refusal", output({"refusal": "no"}), True),
    ("assistant-bad-status", output(status="done"), False),
    ("assistant-phase", output(phase="final_answer"), True),
    ("assistant-string", {"type": "message", "role": "assistant", "content": "4"}, True),
    (
        "assistant-empty-with-id",
        {"type": "message", "role": "assistant", "content": [], "id": "m"},
        True,
    ),
    ("assistant-empty-without-id", {"type": "message", "role": "assistant", "content": []}, True),
    (
        "assistant-mixed-parts",
        output(None) | {"content": [text_with(), {"type": "input_text", "text": "x"}]},
        False,
    ),
    (
        "untyped-assistant-output-without-id",
        {"role": "assistant", "content": [{"type": "output_text", "text": "4"}]},
        True,  # falls to Gym's permissive fallback
    ),
    ("untyped-output-with-id", {"id": "m", "content": [text_with()]}, True),
    (
        "annotation-url",
        output(
            text_with(
                annotations=[
                    {
                        "type": "url_citation",
                        "url": "u",
                        "title": "t",
                        "start_index": 0,
                        "end_index": 1,
                    }
                ]
            )
        ),
        True,
    ),
    (
        "annotation-file",
        output(
            text_with(
                annotations=[{"type": "file_citation", "file_id": "f", "filename": "n", "index": 0}]
            )
        ),
        True,
    ),
    (
        "annotation-path-string-index",
        output(text_with(annotations=[{"type": "file_path", "file_id": "f", "index": "0"}])),
        True,
    ),
    ("annotation-incomplete", output(text_with(annotations=[{"type": "url_citation"}])), False),
    ("annotation-unknown", output(text_with(annotations=[{"type": "nope"}])), False),
    ("annotation-not-object", output(text_with(annotations=[1])), False),
    (
        "logprobs",
        output(
            text_with(logprobs=[{"token": "a", "bytes": [1], "logprob": -0.1, "top_logprobs": []}])
        ),
        True,
    ),
    ("logprobs-incomplete", output(text_with(logprobs=[{"token": "a"}])), False),
    (
        "function-call",
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        True,
    ),
    (
        "function-call-object-arguments",
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": {}},
        False,
    ),
    (
        "function-call-null-id",
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "id": None},
        True,
    ),
    ("function-output", {"type": "function_call_output", "call_id": "c", "output": "x"}, True),
    (
        "function-output-parts",
        {
            "type": "function_call_output",
            "call_id": "c",
            "output": [{"type": "input_text", "text": "x"}],
        },
        True,
    ),
    (
        "function-output-image",
        {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image"}]},
        True,
    ),
    (
        "function-output-text-without-text",
        {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text"}]},
        False,
    ),
    (
        "function-output-object",
        {"type": "function_call_output", "call_id": "c", "output": {"rows": 2}},
        False,
    ),
    ("function-output-int", {"type": "function_call_output", "call_id": "c", "output": 5}, False),
    (
        "function-output-bad-status",
        {"type": "function_call_output", "call_id": "c", "output": "x", "status": "z"},
        False,
    ),
    (
        "reasoning",
        {"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": "t"}]},
        True,
    ),
    ("reasoning-without-summary", {"type": "reasoning", "id": "r"}, False),
    (
        "reasoning-untyped-summary",
        {"type": "reasoning", "id": "r", "summary": [{"text": "t"}]},
        False,
    ),
    (
        "reasoning-content",
        {
            "type": "reasoning",
            "id": "r",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "t"}],
        },
        True,
    ),
    (
        "reasoning-bad-content",
        {"type": "reasoning", "id": "r", "summary": [], "content": [{"type": "x", "text": "t"}]},
        False,
    ),
    (
        "reasoning-int-encrypted",
        {"type": "reasoning", "id": "r", "summary": [], "encrypted_content": 5},
        False,
    ),
    ("untyped-function-call", {"call_id": "c", "name": "f", "arguments": "{}"}, True),
    ("untyped-mcp-call", {"name": "f", "arguments": "{}"}, True),
    ("untyped-function-output", {"call_id": "c", "output": "x"}, True),
    ("untyped-reasoning", {"id": "r", "summary": []}, True),
    ("untyped-junk", {"foo": 1}, True),
    ("untyped-int-id", {"id": 5}, False),
    ("unknown-type", {"type": "bogus"}, False),
    ("int-type", {"type": 5}, False),
    ("training-item", user("x", **TOKENS), True),
    ("training-partial", user("x", prompt_token_ids=[1]), False),
    ("training-only-routed-experts", user("x", routed_experts=[1]), False),
    ("training-bad-token", user("x", **{**TOKENS, "prompt_token_ids": ["a"]}), False),
    ("training-string-logprob", user("x", **{**TOKENS, "generation_log_probs": ["0.5"]}), True),
    (
        "training-function-call",
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", **TOKENS},
        True,
    ),
    (
        "training-fields-on-mcp",
        {"type": "mcp_call", "name": "f", "arguments": "{}", **TOKENS},
        True,
    ),
    ("compaction-trigger", {"type": "compaction_trigger"}, True),
    (
        "file-search",
        {"type": "file_search_call", "id": "x", "queries": [], "status": "completed"},
        True,
    ),
    (
        "file-search-bad-status",
        {"type": "file_search_call", "id": "x", "queries": [], "status": "nah"},
        False,
    ),
    (
        "file-search-without-queries",
        {"type": "file_search_call", "id": "x", "status": "completed"},
        False,
    ),
    ("mcp-list-tools", {"type": "mcp_list_tools"}, True),
    (
        "mcp-approval-response",
        {"type": "mcp_approval_response", "approval_request_id": "a", "approve": True},
        True,
    ),
    (
        "mcp-approval-response-without-approve",
        {"type": "mcp_approval_response", "approval_request_id": "a"},
        False,
    ),
    (
        "custom-tool-call",
        {"type": "custom_tool_call", "call_id": "c", "name": "n", "input": "i"},
        True,
    ),
    (
        "custom-tool-call-without-input",
        {"type": "custom_tool_call", "call_id": "c", "name": "n"},
        False,
    ),
    ("compaction", {"type": "compaction", "id": "c", "encrypted_content": "e"}, True),
    ("compaction-without-content", {"type": "compaction", "id": "c"}, False),
    ("not-an-object", "hello", False),
]
