"""Gym's best-effort reassembly of a streamed response into one object (contract §2.6).

Each dialect's stream of SSE data objects becomes the object its non-streaming call would
have returned, as far as the stream went; nothing usable gives None. Pure functions; no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ledger.gym.dialects import Dialect
from ledger.gym.sse import SseBlock, json_payloads

_RESPONSE_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def reassemble_stream(dialect: Dialect, blocks: Sequence[SseBlock]) -> dict[str, Any] | None:
    payloads = json_payloads(blocks)
    if dialect == "responses":
        return _responses(payloads)
    if dialect == "chat":
        return _chat([payload for _, payload in payloads])
    return _messages([payload for _, payload in payloads])


def _responses(payloads: list[tuple[str | None, dict[str, Any]]]) -> dict[str, Any] | None:
    """The ``response`` of the last final event; else of the last event carrying one."""
    final: dict[str, Any] | None = None
    latest: dict[str, Any] | None = None
    for event, payload in payloads:
        response = payload.get("response")
        if not isinstance(response, dict):
            continue
        latest = response
        kind = payload.get("type") if isinstance(payload.get("type"), str) else event
        if kind in _RESPONSE_FINAL_EVENTS:
            final = response
    return final if final is not None else latest


class _ChatToolCall:
    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.arguments = ""

    def merge(self, delta: Mapping[str, Any]) -> None:
        if isinstance(delta.get("id"), str):
            self.id = delta["id"]
        function = delta.get("function")
        if isinstance(function, Mapping):
            if isinstance(function.get("name"), str):
                self.name = function["name"]
            if isinstance(function.get("arguments"), str):
                self.arguments += function["arguments"]

    def dump(self) -> dict[str, Any]:
        call: dict[str, Any] = {"type": "function"}
        if self.id is not None:
            call["id"] = self.id
        call["function"] = {"name": self.name, "arguments": self.arguments}
        return call


def _chat(payloads: list[dict[str, Any]]) -> dict[str, Any] | None:
    content: list[str] = []
    reasoning: list[str] = []
    tools: dict[int, _ChatToolCall] = {}
    role = "assistant"
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    response_id: str | None = None
    saw_choice = False
    for payload in payloads:
        if isinstance(payload.get("model"), str):
            model = payload["model"]
        if isinstance(payload.get("id"), str):
            response_id = payload["id"]
        if isinstance(payload.get("usage"), dict):
            usage = payload["usage"]
        choices = payload.get("choices")
        if not isinstance(choices, list):
            continue
        for choice in choices:
            # One reassembled choice: the first (index 0, or no index at all).
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            saw_choice = True
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if not isinstance(delta, Mapping):
                continue
            if isinstance(delta.get("role"), str):
                role = delta["role"]
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            thought = delta.get("reasoning_content")
            if not isinstance(thought, str):
                thought = delta.get("reasoning")
            if isinstance(thought, str):
                reasoning.append(thought)
            tool_deltas = delta.get("tool_calls")
            if isinstance(tool_deltas, list):
                for position, tool_delta in enumerate(tool_deltas):
                    if not isinstance(tool_delta, Mapping):
                        continue
                    index = tool_delta.get("index", position)
                    if isinstance(index, int) and not isinstance(index, bool):
                        tools.setdefault(index, _ChatToolCall()).merge(tool_delta)
    if not saw_choice:
        return None
    message: dict[str, Any] = {"role": role, "content": "".join(content) or None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if tools:
        message["tool_calls"] = [tools[index].dump() for index in sorted(tools)]
    result: dict[str, Any] = {
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if response_id is not None:
        result["id"] = response_id
    if usage is not None:
        result["usage"] = usage
    return result


def _tool_input(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return {"_raw": text}


def _messages(payloads: list[dict[str, Any]]) -> dict[str, Any] | None:
    message: dict[str, Any] = {}
    usage: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, list[str]] = {}
    seen = False
    for payload in payloads:
        kind = payload.get("type")
        if kind == "message_start" and isinstance(payload.get("message"), Mapping):
            seen = True
            start = dict(payload["message"])
            if isinstance(start.get("usage"), dict):
                usage = dict(start["usage"])
            message.update({k: v for k, v in start.items() if k not in ("content", "usage")})
        elif kind == "content_block_start" and isinstance(payload.get("index"), int):
            seen = True
            block = payload.get("content_block")
            blocks[payload["index"]] = dict(block) if isinstance(block, Mapping) else {}
        elif kind == "content_block_delta" and isinstance(payload.get("index"), int):
            seen = True
            _apply_block_delta(blocks, partial_json, payload["index"], payload.get("delta"))
        elif kind == "message_delta":
            seen = True
            if isinstance(payload.get("usage"), Mapping):
                usage = {**(usage or {}), **payload["usage"]}
            delta = payload.get("delta")
            if isinstance(delta, Mapping) and "stop_reason" in delta:
                message["stop_reason"] = delta["stop_reason"]
    if not seen:
        return None
    for index, parts in partial_json.items():
        block = blocks.get(index)
        if block is not None and block.get("type") == "tool_use" and not block.get("input"):
            block["input"] = _tool_input("".join(parts))
    result = {**message, "type": "message", "content": [blocks[i] for i in sorted(blocks)]}
    if usage is not None:
        result["usage"] = usage
    return result


def _apply_block_delta(
    blocks: dict[int, dict[str, Any]],
    partial_json: dict[int, list[str]],
    index: int,
    delta: object,
) -> None:
    if not isinstance(delta, Mapping):
        return
    block = blocks.setdefault(index, {})
    kind = delta.get("type")
    if kind == "text_delta" and isinstance(delta.get("text"), str):
        block["text"] = str(block.get("text") or "") + delta["text"]
    elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
        block["thinking"] = str(block.get("thinking") or "") + delta["thinking"]
    elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
        partial_json.setdefault(index, []).append(delta["partial_json"])
