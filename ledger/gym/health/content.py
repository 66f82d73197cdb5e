"""What counts as a message, a tool call, or a response with content."""

from __future__ import annotations

from typing import Any

_TEXT_KEYS = (
    "text",
    "content",
    "output_text",
    "answer",
    "refusal",
    "encrypted_content",
    "reasoning",
    "reasoning_content",
    "summary",
)
TOOL_CALL_TYPES = frozenset(
    {
        "function_call",
        "tool_call",
        "tool_use",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "file_search_call",
        "web_search_call",
        "computer_call",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "custom_tool_call",
    }
)


def nonempty(value: object) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, list | tuple):
        return any(nonempty(item) for item in value)
    if isinstance(value, dict):
        return any(nonempty(value.get(key)) for key in _TEXT_KEYS)
    return False


def has_tool_call(value: object) -> bool:
    if isinstance(value, list | tuple):
        return any(has_tool_call(item) for item in value)
    if not isinstance(value, dict):
        return False
    return value.get("type") in TOOL_CALL_TYPES or bool(value.get("tool_calls"))


def _choices(value: object) -> list[object]:
    """The entries a ``for`` over ``choices`` visits (a dict gives its keys, a string its
    characters); a number cannot be iterated, and Gym's check raises TypeError on it."""
    if not value:
        return []
    if isinstance(value, list | tuple | dict | str):
        return list(value)
    raise TypeError(f"choices of type {type(value).__name__} is not iterable")


def _chat_content(choices: object) -> bool:
    for choice in _choices(choices):
        if not isinstance(choice, dict):
            continue
        if nonempty(choice.get("text")):
            return True
        message = choice.get("message") or {}
        if not isinstance(message, dict):
            raise AttributeError(f"choices[].message of type {type(message).__name__}")
        if nonempty(message.get("content")):
            return True
    return False


def response_has_content(response: Any) -> bool:
    """Whether a length-limited response still produced something. The chat choices are read
    even when ``output`` has content, so a malformed choice raises either way (as in Gym: the
    check then counts as raised, see evaluate)."""
    if not isinstance(response, dict):
        return False
    if nonempty(response.get("output_text")) or nonempty(response.get("content")):
        return True
    chat = _chat_content(response.get("choices"))
    return nonempty(response.get("output")) or chat
