"""Two pydantic dumps made by hand for the values that need no validation work.

Deriving a capture (``areas/captures/derivation.py``) validates its fields into a
``ModelCallRecord`` and its trajectory entry into a ``TrajectoryModelCall``, only to dump both
again: about a quarter of the derivation's time, paid on ingest, in ``ledger verify`` and in the
proxy. When every value already has its field's exact type (a str where the field is a str, a
finite float where it is a float, a bool where it is a bool, and so on), validation changes
nothing, and the dump is the fields in order. These functions make that dump directly, and answer
``None`` ("ask pydantic") for anything else: a value validation would coerce (``"200"`` or
``200.0`` as a status code, ``True`` as a time), refuse, or dump otherwise (non-finite floats, a
key that is no str). So every answer is pydantic's or none; tests/gym/test_plain_dumps.py compares
both on generated exchanges.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ledger.gym.model_calls import PAYLOAD_FIELDS, ToolCall
from ledger.gym.trajectory import trajectory_model_call
from ledger.gym.trajectory_record import TrajectoryResponseMetadata, TrajectoryTokenStats
from ledger.log.canonical import Checked, is_plain_json, plain_compact_json


class Ask:
    """The answer "ask pydantic" (a field's own None is a valid, unchanged value)."""


ASK = Ask()

_LARGEST_EXACT_FLOAT = 2**53


def _text(value: object) -> object:
    return value if value is None or type(value) is str else ASK


def _integer(value: object) -> object:
    return value if value is None or type(value) is int else ASK  # a bool is no int here


def _number(value: object) -> object:
    """A float field: a finite float as it is, a modest int as pydantic makes it (5 -> 5.0)."""
    if value is None:
        return None
    if type(value) is float:
        return value if math.isfinite(value) else ASK
    if type(value) is int and -_LARGEST_EXACT_FLOAT <= value <= _LARGEST_EXACT_FLOAT:
        return float(value)
    return ASK


def _flag(value: object) -> object:
    return value if value is None or type(value) is bool else ASK


def _model_ref(value: object) -> object:
    """``ModelServerRef`` ignores extra keys: the dump is just its two fields."""
    if value is None:
        return None
    if type(value) is dict and value.get("type") == "responses_api_models":
        name = value.get("name")
        if type(name) is str and type(value["type"]) is str:
            return {"type": "responses_api_models", "name": name}
    return ASK


def _source(value: object) -> object:
    return (
        value if value is None or (type(value) is str and value in ("upstream", "local")) else ASK
    )


def _object(value: object) -> object:
    """``dict[str, Any]``: a dict whose keys are all str validates to a copy of itself."""
    if value is None:
        return None
    if type(value) is dict and all(type(key) is str for key in value):
        return value
    return ASK


def _tool_calls(value: object) -> object:
    """``list[ToolCall]`` of the extracted calls, dumped; their arguments must be plain."""
    if type(value) is not list:
        return ASK
    dumps = []
    for call in value:
        if type(call) is not ToolCall or not is_plain_json(call.arguments):
            return ASK
        dumps.append({"call_id": call.call_id, "name": call.name, "arguments": call.arguments})
    return dumps


_RECORD_CHECKS: dict[str, Callable[[object], object]] = {
    "model_call_id": _text,
    "response_id": _text,
    "client_session_id": _text,
    "call_index": _integer,
    "model_ref": _model_ref,
    "model": _text,
    "dialect": _text,
    "status_code": _integer,
    "response_status": _text,
    "finish_reason": _text,
    "started_at": _number,
    "completed_at": _number,
    "tokens_in": _integer,
    "tokens_out": _integer,
    "tokens_reasoning": _integer,
    "tokens_total": _integer,
    "request": _object,
    "response": _object,
    "request_raw": _text,
    "response_raw": _text,
    "tool_calls": _tool_calls,
    "reasoning_content": _text,
    "cache_hit": _flag,
    "cached_tokens": _integer,
    "cache_creation_tokens": _integer,
    "error_category": _text,
    "latency_total_ms": _number,
    "latency_ttft_ms": _number,
    "upstream_attempted": _flag,
    "response_source": _source,
    "upstream_status_code": _integer,
    "local_response_reason": _text,
}
_PAYLOADS = frozenset(PAYLOAD_FIELDS)


def record_dump(fields: Mapping[str, Any]) -> dict[str, Any] | None:
    """``ModelCallRecord.model_validate(fields).model_dump(mode="json",
    exclude=PAYLOAD_FIELDS)`` for ``record_fields``' output, or None to ask pydantic."""
    dump: dict[str, Any] = {}
    for name, check in _RECORD_CHECKS.items():
        value = check(fields[name])
        if value is ASK:
            return None
        if name not in _PAYLOADS:  # validated (a key that is no str fails), never dumped
            dump[name] = value
    return dump


_METADATA_FIELDS: Sequence[str] = tuple(TrajectoryResponseMetadata.model_fields)
_TOKEN_FIELDS: Sequence[str] = tuple(TrajectoryTokenStats.model_fields)


# The entry's members that are the call's payloads (``trajectory_model_call``).
_ENTRY_PAYLOADS = ("request", "response")


def trajectory_entry_text(call: Mapping[str, Any], *, plain: Checked = False) -> str | Ask | None:
    """``derivation.trajectory_entry(call)`` for a record dump with payloads made by
    ``record_dump`` (so every metadata value has its type already): the entry's compact JSON,
    None when the entry is not valid on its own, ``ASK`` to ask pydantic. ``plain``: what of
    ``call`` the caller has found plain (all of it, or its payload fields); the entry is made of
    the call's values under str keys, so the same of it is plain."""
    projected = trajectory_model_call(call)
    metadata = projected["response_metadata"]
    duration, ttft = projected["duration_ms"], metadata.get("latency_ttft_ms")
    # The entry's only constraints beyond the record's types: non-negative durations (its
    # token counts are non-negative by construction).
    if (duration is not None and duration < 0) or (ttft is not None and ttft < 0):
        return None
    entry = {
        "model_call_id": projected["model_call_id"],
        "started_at": projected["started_at"],
        "completed_at": projected["completed_at"],
        "duration_ms": duration,
        "request": projected["request"],
        "response": projected["response"],
        "response_metadata": {name: metadata.get(name) for name in _METADATA_FIELDS},
        "token_stats": {name: projected["token_stats"].get(name) for name in _TOKEN_FIELDS},
    }
    # ``request`` and ``response`` are ``Any``: a JSON-mode dump leaves plain JSON as it is.
    entry_plain: Checked = plain if plain is True else (_ENTRY_PAYLOADS if plain else False)
    text = plain_compact_json(entry, plain=entry_plain)
    return ASK if text is None else text
