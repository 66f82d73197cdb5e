"""Gym's raw capture lines (contract §2.3): the wire model, the two reads, and the line writer."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
)

from ledger.gym.finite_json import loads_finite
from ledger.gym.ids import PRINTABLE_ID_PATTERN

# Gym's key order of one capture line (§2.3); the mirror writes known keys in this order.
CAPTURE_LINE_KEYS: tuple[str, ...] = (
    "model_call_id",
    "dialect",
    "model_ref",
    "started_at",
    "completed_at",
    "latency_ms",
    "latency_ttft_ms",
    "status_code",
    "error_category",
    "request",
    "response",
    "request_raw",
    "response_raw",
    "client_session_id",
    "upstream_attempted",
    "response_source",
    "upstream_status_code",
    "local_response_reason",
)
# Gym writes these on every line (null when unknown); the rest only when they have a value.
ALWAYS_WRITTEN_KEYS: frozenset[str] = frozenset(CAPTURE_LINE_KEYS[:11])

MAX_MODEL_CALL_ID_LENGTH = 128
MAX_LABEL_LENGTH = 256

# Durations and timestamps are at most this large (ms: 31,000 years; s: 31 million years):
# the ledger sums and subtracts them, and sums of larger finite floats overflow to infinity,
# which is not JSON (a rollout's record could no longer be written).
MAX_MEASURE = 1e15
# A finite, non-negative JSON number (int or float, never bool or numeric text).
NonNegativeNumber = Annotated[float, Field(ge=0, le=MAX_MEASURE, strict=True, allow_inf_nan=False)]
HttpStatus = Annotated[StrictInt, Field(ge=100, le=599)]
Label = Annotated[StrictStr, Field(min_length=1, max_length=MAX_LABEL_LENGTH)]
ModelCallId = Annotated[
    StrictStr,
    Field(
        min_length=1,
        max_length=MAX_MODEL_CALL_ID_LENGTH,
        pattern=PRINTABLE_ID_PATTERN,
    ),
]


class CaptureModelRef(BaseModel):
    """``model_ref`` as POSTed: exactly Gym's ModelServerRef, nothing else."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["responses_api_models"]
    name: Label


class CaptureExchange(BaseModel):
    """One raw exchange as POSTed to the ledger (Gym's capture-line shape, §2.3).

    Every key is optional; unknown top-level keys are refused; numbers are finite JSON numbers
    (no numeric strings, no bools); request/response are JSON objects or null. What is inside
    them is not walked here: the parsers that take exchanges (the routes' body parser, the
    capture-line reader, the proxy's) refuse NaN and Infinity, which are not JSON.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model_call_id: ModelCallId | None = None
    dialect: Label | None = None
    model_ref: CaptureModelRef | None = None
    started_at: NonNegativeNumber | None = None
    completed_at: NonNegativeNumber | None = None
    latency_ms: NonNegativeNumber | None = None
    latency_ttft_ms: NonNegativeNumber | None = None
    status_code: HttpStatus | None = None
    error_category: Label | None = None
    request: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    request_raw: StrictStr | None = None
    response_raw: StrictStr | None = None
    client_session_id: Label | None = None
    upstream_attempted: StrictBool | None = None
    response_source: Literal["upstream", "local"] | None = None
    upstream_status_code: HttpStatus | None = None
    local_response_reason: Label | None = None

    def line_keys(self) -> list[str]:
        """The keys of ``to_line()`` in its order, without dumping the values."""
        return [
            key
            for key in CAPTURE_LINE_KEYS
            if key in ALWAYS_WRITTEN_KEYS or getattr(self, key) is not None
        ]

    def to_line(self) -> dict[str, Any]:
        """The exchange as Gym writes it: core keys always (null if unknown), others if set."""
        values = self.model_dump(mode="json")
        return {key: values[key] for key in self.line_keys()}


def _decode_line(line: str | bytes) -> str:
    return line.decode("utf-8") if isinstance(line, bytes) else line


def _is_blank(line: str | bytes) -> bool:
    return not line.strip()


def _load_object(text: str) -> dict[str, Any]:
    """Parse one line; ValueError unless it is a JSON object with only standard JSON numbers."""
    value = loads_finite(text)
    if not isinstance(value, dict):
        raise ValueError(f"a capture line must be a JSON object, got {type(value).__name__}")
    return value


def parse_capture_text(
    lines: Iterable[str | bytes],
) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """Gym's tolerant read: ``([(position, exchange), ...], invalid_count)``.

    Blank lines are skipped and consume no position; every other line consumes one. Lines that
    are not UTF-8, not JSON, or not a JSON object are counted invalid and skipped.
    """
    exchanges: list[tuple[int, dict[str, Any]]] = []
    invalid = 0
    position = 0
    for line in lines:
        if _is_blank(line):
            continue
        try:
            exchanges.append((position, _load_object(_decode_line(line))))
        except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            invalid += 1
        position += 1
    return exchanges, invalid


def parse_capture_text_strict(lines: Iterable[str | bytes]) -> list[dict[str, Any]]:
    """Gym's strict read: blank lines skipped; any malformed line raises ValueError.

    Text that is not JSON raises ``json.JSONDecodeError`` (a ValueError); a line that is not
    UTF-8, not an object, or uses NaN/Infinity raises a plain ValueError. Messages name the line
    number (1-based, blank lines included).
    """
    exchanges: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if _is_blank(line):
            continue
        try:
            exchanges.append(_load_object(_decode_line(line)))
        except json.JSONDecodeError as error:
            # Stays a JSONDecodeError (as in Gym's strict read), now naming the line.
            message = f"capture line {number} is malformed: {error.msg}"
            raise json.JSONDecodeError(message, error.doc, error.pos) from error
        except ValueError as error:
            raise ValueError(f"capture line {number} is malformed: {error}") from error
    return exchanges


def serialize_capture_line(exchange: Mapping[str, Any]) -> str:
    """One capture line, without the trailing newline; the same input always gives the same bytes.

    Top-level keys in Gym's order (CAPTURE_LINE_KEYS), unknown keys after them sorted; nested
    objects with sorted keys. ``json.dumps`` options: Gym's defaults for separators (", ", ": ")
    and ``ensure_ascii=True``; ``default=str`` stringifies non-JSON values as Gym does;
    ``allow_nan=False`` refuses NaN/Infinity (ValueError) because they are not JSON.
    """
    known = [key for key in CAPTURE_LINE_KEYS if key in exchange]
    unknown = sorted(str(key) for key in exchange if key not in CAPTURE_LINE_KEYS)
    members = []
    for key in [*known, *unknown]:
        encoded_value = _VALUE_ENCODER.encode(exchange[key])
        members.append(f"{json.dumps(key)}: {encoded_value}")
    return "{" + ", ".join(members) + "}"


# What ``json.dumps(value, sort_keys=True, default=str, allow_nan=False)`` builds at every call,
# built once: a line encodes each top-level value with it.
_VALUE_ENCODER = json.JSONEncoder(sort_keys=True, default=str, allow_nan=False)
