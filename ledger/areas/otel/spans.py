"""Spans as plain values: what the mapping produces and the wire encoder reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

AttributeValue = str | bool | int | float | tuple[str, ...]
Attributes = dict[str, AttributeValue]
SpanKindName = Literal["internal", "client"]
StatusName = Literal["unset", "ok", "error"]


@dataclass(frozen=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes | None
    name: str
    kind: SpanKindName
    start_ns: int
    end_ns: int
    attributes: Attributes
    status: StatusName = "unset"
    status_message: str = ""
    events: tuple[SpanEvent, ...] = ()
