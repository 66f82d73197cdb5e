"""Tool calls and reasoning text out of a response body (Gym contract §2.9).

The three dialects are recognised by shape, not by the exchange's ``dialect``: Responses bodies
carry an ``output`` list, Chat Completions a ``choices`` list, Anthropic Messages a ``content``
list. Each shape present contributes, in that order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel


class ToolCall(BaseModel):
    """One tool call the model asked for; ``arguments`` is always an object (see coercion)."""

    call_id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] = {}


def _refuse_non_finite(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def coerce_arguments(value: object) -> dict[str, Any]:
    """Object as is; JSON text parsed; unparseable text kept as ``{"_raw": text}``; else ``{}``.

    Text that parses to something other than an object (``"[1]"``, ``"5"``) or that needs the
    non-standard NaN/Infinity constants cannot be an arguments object, so it is kept raw too.
    """
    if isinstance(value, Mapping):
        return {str(key): item for key, item in value.items()}
    if isinstance(value, str):
        try:
            parsed = json.loads(value, parse_constant=_refuse_non_finite)
        except ValueError:
            return {"_raw": value}
        if isinstance(parsed, dict):
            return parsed
        return {"_raw": value}
    return {}


def _string_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _first_non_empty_string(*values: object) -> str | None:
    for value in values:
        if isinstance(value, str) and value:
            return value
    return None


@dataclass
class _Extracted:
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)

    def add_reasoning(self, text: object) -> None:
        # Empty strings carry no reasoning; skipping them keeps the "\n" join free of blank lines.
        if isinstance(text, str) and text:
            self.reasoning.append(text)


def _from_responses_output(output: list[Any], found: _Extracted) -> None:
    for item in output:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "function_call":
            found.tool_calls.append(
                ToolCall(
                    call_id=_first_non_empty_string(item.get("call_id"), item.get("id")),
                    name=_string_or_none(item.get("name")),
                    arguments=coerce_arguments(item.get("arguments")),
                )
            )
        elif kind == "reasoning":
            summary = item.get("summary")
            if isinstance(summary, list):
                for part in summary:
                    if isinstance(part, Mapping):
                        found.add_reasoning(part.get("text"))


def _from_chat_choices(choices: list[Any], found: _Extracted) -> None:
    for choice in choices:
        if not isinstance(choice, Mapping):
            continue
        message = choice.get("message")
        if not isinstance(message, Mapping):
            continue
        tool_calls = message.get("tool_calls")
        if isinstance(tool_calls, list):
            for call in tool_calls:
                if not isinstance(call, Mapping):
                    continue
                function = call.get("function")
                function = function if isinstance(function, Mapping) else {}
                found.tool_calls.append(
                    ToolCall(
                        call_id=_string_or_none(call.get("id")),
                        name=_string_or_none(function.get("name")),
                        arguments=coerce_arguments(function.get("arguments")),
                    )
                )
        # reasoning_content wins over reasoning (vLLM and others use either name).
        found.add_reasoning(
            _first_non_empty_string(message.get("reasoning_content"), message.get("reasoning"))
        )


def _from_anthropic_content(content: list[Any], found: _Extracted) -> None:
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "tool_use":
            arguments = block.get("input")
            found.tool_calls.append(
                ToolCall(
                    call_id=_string_or_none(block.get("id")),
                    name=_string_or_none(block.get("name")),
                    arguments=coerce_arguments(arguments if arguments else {}),
                )
            )
        elif kind in ("thinking", "redacted_thinking"):
            found.add_reasoning(block.get("thinking"))


def extract_tool_calls_and_reasoning(response: object) -> tuple[list[ToolCall], str | None]:
    """Tool calls in response order and the reasoning texts joined by "\\n" (None if none)."""
    found = _Extracted()
    if isinstance(response, Mapping):
        output = response.get("output")
        if isinstance(output, list):
            _from_responses_output(output, found)
        choices = response.get("choices")
        if isinstance(choices, list):
            _from_chat_choices(choices, found)
        content = response.get("content")
        if isinstance(content, list):
            _from_anthropic_content(content, found)
    reasoning = "\n".join(found.reasoning) if found.reasoning else None
    return found.tool_calls, reasoning


def extract_tool_calls(response: object) -> list[ToolCall]:
    return extract_tool_calls_and_reasoning(response)[0]


def extract_reasoning(response: object) -> str | None:
    return extract_tool_calls_and_reasoning(response)[1]
