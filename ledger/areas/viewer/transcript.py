"""A captured call's request and response as conversation messages, for the three dialects.

Pure functions over the stored JSON: chat messages (``dialect="chat"``), Responses items
(``"responses"``) and Anthropic content blocks (``"messages"``) all become ``Message``s of
``Part``s (text, reasoning, a tool call, a tool result, an image, anything else), so the page
renders one shape. Nothing here trusts the payload: every field is read defensively and a value
of an unexpected type becomes an ``other`` part holding its JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

PartKind = Literal["text", "reasoning", "tool_call", "tool_result", "image", "other"]


@dataclass
class Part:
    kind: PartKind
    text: str = ""
    # A tool call's name and id; a tool result's id (of the call it answers).
    name: str | None = None
    call_id: str | None = None
    # An image's media type (``None``: a URL, not inline data); a tool result's error flag.
    media_type: str | None = None
    is_error: bool = False
    # A tool call's result, attached where it is answered (``attach_results``).
    result: Part | None = None


@dataclass
class Message:
    role: str
    parts: list[Part] = field(default_factory=list)

    def key(self) -> tuple[object, ...]:
        """What identifies a reply when the next request echoes it (reasoning is often
        dropped from the echo, so it does not count)."""
        return (
            self.role,
            tuple((p.kind, p.text, p.name, p.call_id) for p in self.parts if p.kind != "reasoning"),
        )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def pretty_arguments(value: Any) -> str:
    """Tool arguments pretty-printed: a JSON string is parsed first (chat and Responses send
    arguments as a string of JSON), anything unparseable is shown as it is."""
    if isinstance(value, str):
        try:
            return _json(json.loads(value))
        except ValueError:
            return value
    return _json(value)


def _image(url: Any) -> Part:
    """An image by URL; inline data (``data:<type>;base64,...``) keeps its media type."""
    if isinstance(url, dict):
        url = url.get("url")
    text = url if isinstance(url, str) else ""
    if text.startswith("data:") and ";base64," in text[:100]:
        media_type = text[5 : text.index(";base64,")]
        return Part("image", text=text, media_type=media_type)
    return Part("image", text=text)


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(item.get("text")) if isinstance(item, dict) and "text" in item else _json(item)
            for item in value
        )
    return "" if value is None else _json(value)


# --- chat (OpenAI chat completions) --------------------------------------------------------


def _chat_content(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Part("text", content)] if content else []
    if not isinstance(content, list):
        return [Part("other", _json(content))]
    parts = []
    for item in content:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text" and isinstance(item.get("text"), str):
            parts.append(Part("text", item["text"]))
        elif kind == "image_url":
            parts.append(_image(item.get("image_url")))
        else:
            parts.append(Part("other", _json(item)))
    return parts


def chat_message(raw: Any) -> Message:
    if not isinstance(raw, dict):
        return Message("unknown", [Part("other", _json(raw))])
    role = str(raw.get("role") or "unknown")
    parts: list[Part] = []
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    if reasoning:
        parts.append(Part("reasoning", _text_of(reasoning)))
    if role == "tool":
        return Message(
            role,
            [
                Part(
                    "tool_result",
                    _text_of(raw.get("content")),
                    call_id=_str(raw.get("tool_call_id")),
                )
            ],
        )
    parts.extend(_chat_content(raw.get("content")))
    for call in raw.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            parts.append(Part("other", _json(call)))
            continue
        parts.append(
            Part(
                "tool_call",
                pretty_arguments(function.get("arguments")),
                name=_str(function.get("name")),
                call_id=_str(call.get("id")),
            )
        )
    return Message(role, parts)


# --- Responses ------------------------------------------------------------------------------


def _responses_content(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Part("text", content)] if content else []
    if not isinstance(content, list):
        return [] if content is None else [Part("other", _json(content))]
    parts = []
    for item in content:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(item.get("text"), str):
            parts.append(Part("text", item["text"]))
        elif kind == "refusal":
            parts.append(Part("text", _str(item.get("refusal")) or ""))
        elif kind == "input_image":
            parts.append(_image(item.get("image_url")))
        else:
            parts.append(Part("other", _json(item)))
    return parts


def responses_item(raw: Any) -> Message:
    if not isinstance(raw, dict):
        return Message("unknown", [Part("other", _json(raw))])
    kind = raw.get("type")
    if kind in (None, "message"):
        return Message(str(raw.get("role") or "unknown"), _responses_content(raw.get("content")))
    if kind == "reasoning":
        summary = _text_of(raw.get("summary"))
        content = _text_of(raw.get("content")) if raw.get("content") else ""
        return Message(
            "assistant", [Part("reasoning", "\n".join(t for t in (summary, content) if t))]
        )
    if kind in ("function_call", "custom_tool_call"):
        arguments = raw.get("arguments") if kind == "function_call" else raw.get("input")
        return Message(
            "assistant",
            [
                Part(
                    "tool_call",
                    pretty_arguments(arguments),
                    name=_str(raw.get("name")),
                    call_id=_str(raw.get("call_id")),
                )
            ],
        )
    if kind in ("function_call_output", "custom_tool_call_output"):
        return Message(
            "tool",
            [Part("tool_result", _text_of(raw.get("output")), call_id=_str(raw.get("call_id")))],
        )
    return Message(str(raw.get("role") or "assistant"), [Part("other", _json(raw))])


# --- Anthropic messages ---------------------------------------------------------------------


def _anthropic_blocks(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Part("text", content)] if content else []
    if not isinstance(content, list):
        return [] if content is None else [Part("other", _json(content))]
    parts = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(Part("text", block["text"]))
        elif kind == "thinking":
            parts.append(Part("reasoning", _text_of(block.get("thinking"))))
        elif kind == "redacted_thinking":
            parts.append(Part("reasoning", "(redacted)"))
        elif kind in ("tool_use", "server_tool_use"):
            parts.append(
                Part(
                    "tool_call",
                    pretty_arguments(block.get("input")),
                    name=_str(block.get("name")),
                    call_id=_str(block.get("id")),
                )
            )
        elif kind == "tool_result":
            parts.append(
                Part(
                    "tool_result",
                    _text_of(block.get("content")),
                    call_id=_str(block.get("tool_use_id")),
                    is_error=block.get("is_error") is True,
                )
            )
        elif kind == "image":
            source = block.get("source") if isinstance(block.get("source"), dict) else {}
            if source.get("type") == "base64":
                media_type = _str(source.get("media_type")) or "application/octet-stream"
                data = _str(source.get("data")) or ""
                parts.append(_image(f"data:{media_type};base64,{data}"))
            else:
                parts.append(_image(source.get("url")))
        else:
            parts.append(Part("other", _json(block)))
    return parts


def anthropic_message(raw: Any) -> Message:
    if not isinstance(raw, dict):
        return Message("unknown", [Part("other", _json(raw))])
    return Message(str(raw.get("role") or "unknown"), _anthropic_blocks(raw.get("content")))


# --- the request's input and the response's output ------------------------------------------


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def input_items(dialect: str | None, request: Any) -> list[Any]:
    """The request's conversation items, raw (compared between calls to find what is new)."""
    if not isinstance(request, dict):
        return []
    if dialect == "responses":
        found = request.get("input")
        items: list[Any] = [] if found is None else found if isinstance(found, list) else [found]
        return items
    found = request.get("messages")
    return list(found) if isinstance(found, list) else []


def system_message(dialect: str | None, request: Any) -> Message | None:
    """Instructions outside the conversation items: Responses ``instructions``, Anthropic
    ``system`` (chat keeps its system message among the messages)."""
    if not isinstance(request, dict):
        return None
    if dialect == "responses" and request.get("instructions"):
        return Message("system", [Part("text", _text_of(request["instructions"]))])
    if dialect == "messages" and request.get("system"):
        return Message("system", [Part("text", _text_of(request["system"]))])
    return None


def item_message(dialect: str | None, raw: Any) -> Message:
    if dialect == "responses":
        if isinstance(raw, str):
            return Message("user", [Part("text", raw)])
        return responses_item(raw)
    if dialect == "messages":
        return anthropic_message(raw)
    return chat_message(raw)


def output_messages(dialect: str | None, response: Any) -> list[Message]:
    """The reply: chat's first choice, the Responses output items, the Anthropic message."""
    if not isinstance(response, dict):
        return []
    if dialect == "responses":
        output = response.get("output")
        return [responses_item(item) for item in output] if isinstance(output, list) else []
    if dialect == "messages":
        if "content" not in response:
            return []
        return [anthropic_message({"role": response.get("role") or "assistant", **response})]
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return [chat_message(choices[0].get("message"))]
    return []


def error_text(response: Any, raw: Any) -> str | None:
    """What an upstream error said (its ``error.message``, else the raw body)."""
    if isinstance(response, dict) and isinstance(response.get("error"), dict):
        message = response["error"].get("message")
        return message if isinstance(message, str) else _json(response["error"])
    if isinstance(raw, str) and raw:
        return raw
    return None


def new_items(previous: Sequence[Any], current: Sequence[Any]) -> tuple[int, int]:
    """How many of ``current``'s items continue ``previous`` (its longest common prefix) and
    how many of ``previous`` the request no longer carries (history edited or compacted)."""
    shared = 0
    for before, now in zip(previous, current, strict=False):
        if before != now:
            break
        shared += 1
    return shared, len(previous) - shared


def attach_results(groups: Sequence[Sequence[Message]]) -> list[list[Message]]:
    """Each tool result moved beside the tool call it answers (by call id), when that call
    came earlier in ``groups`` (a page's turns, in order); a message left with no part is
    dropped. Results whose call is not there stay where they are."""
    calls: dict[str, Part] = {}
    out: list[list[Message]] = []
    for group in groups:
        kept: list[Message] = []
        for message in group:
            parts = []
            for part in message.parts:
                if part.kind == "tool_call" and part.call_id:
                    calls.setdefault(part.call_id, part)
                if part.kind == "tool_result" and part.call_id in calls:
                    owner = calls[part.call_id]
                    if owner.result is None:
                        owner.result = part
                        continue
                parts.append(part)
            if parts or not message.parts:
                kept.append(Message(message.role, parts))
        out.append(kept)
    return out
