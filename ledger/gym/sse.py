"""Server-sent events as Gym's capture reads them (contract §2.4, §2.6): blocks, terminals.

A stream is split into blocks on blank lines (``\\n\\n`` or ``\\r\\n\\r\\n``); in a block, a line
``field:value`` counts as ``field: value``. A block's ``data`` is its data lines joined with a
newline. Pure functions; no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ledger.gym.dialects import Dialect

Terminal = Literal["complete", "incomplete", "error"]

STREAM_CONTENT_TYPE = "text/event-stream"


@dataclass(frozen=True)
class SseBlock:
    event: str | None
    data: str | None

    def json_object(self) -> dict[str, Any] | None:
        """The data as a JSON object; ``[DONE]``, non-JSON and non-objects give None."""
        if self.data is None or self.data == "[DONE]":
            return None
        try:
            value = json.loads(self.data)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def is_event_stream(content_type: str | None) -> bool:
    return content_type is not None and content_type.strip().lower().startswith(STREAM_CONTENT_TYPE)


def parse_block(block: str) -> SseBlock:
    event: str | None = None
    data_lines: list[str] = []
    for line in block.split("\n"):
        if not line or line.startswith(":"):
            continue  # blank, or an SSE comment
        field, _, value = line.partition(":")
        # "field:value" and "field: value" are the same field (one leading space dropped).
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data_lines.append(value)
    return SseBlock(event=event, data="\n".join(data_lines) if data_lines else None)


def parse_stream(text: str) -> list[SseBlock]:
    """Every non-empty block of a stream, in order (a last block without its blank line too)."""
    normalised = text.replace("\r\n", "\n")
    return [parse_block(block) for block in normalised.split("\n\n") if block.strip()]


def block_terminal(dialect: Dialect, block: SseBlock) -> Terminal | None:
    """Gym's terminal events: what this block says about the end of the stream, if anything."""
    if block.event == "error":
        return "error"
    if dialect == "responses":
        return {
            "response.completed": "complete",
            "response.incomplete": "incomplete",
            "response.failed": "error",
        }.get(block.event or "")  # type: ignore[return-value]
    if dialect == "chat":
        if block.data == "[DONE]":
            return "complete"
        payload = block.json_object()
        if payload is not None and payload.get("error") is not None:
            return "error"
        return None
    return "complete" if block.event == "message_stop" else None


def stream_terminal(dialect: Dialect, blocks: Iterable[SseBlock]) -> Terminal | None:
    """The first terminal event of the stream (None: it closed without one)."""
    for block in blocks:
        terminal = block_terminal(dialect, block)
        if terminal is not None:
            return terminal
    return None


def json_payloads(blocks: Sequence[SseBlock]) -> list[tuple[str | None, dict[str, Any]]]:
    """``(event, data object)`` of every block whose data is a JSON object."""
    found = []
    for block in blocks:
        payload = block.json_object()
        if payload is not None:
            found.append((block.event, payload))
    return found
