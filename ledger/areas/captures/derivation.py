"""What the views derive from a captured exchange, computed once per event.

A capture's view rows need its ``ModelCallRecord`` (the capture view's normalised columns and
payload-free record, the observations view's trajectory entry).
Deriving it (pydantic validation and dumps) is the largest part of applying a capture, and it
needs no ledger state but the call's position, ``call_index``, which the write side gave it.
Every derived piece is a function of the exchange alone apart from the ``call_index`` field of
the two record dumps (``build_model_call_record`` copies its argument into that field and
nothing else depends on it), so ``derive_call`` builds the record at position 0 and the
projectors put the real position into those dumps (``at_position``).

Nothing is derived on the append: the kind's ``EventType.derive`` runs when a page of the log
is decoded for the views (the projection follower, a rebuild, ``verify``), and both views take
it from ``StoredEvent.derived``; a view applying an event without it calls ``derive_call``
itself (``derived_of``), so the rows are the same function of the event either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ledger.gym.model_calls import (
    PAYLOAD_FIELDS,
    ModelCallRecord,
    dump_with_payloads,
    record_fields,
)
from ledger.gym.trajectory import trajectory_model_call
from ledger.gym.trajectory_record import TrajectoryModelCall
from ledger.log.canonical import compact_json

_PAYLOADS = set(PAYLOAD_FIELDS)


@dataclass(frozen=True)
class DerivedCall:
    """``columns``: the capture projection's normalised columns but ``record`` (``{"damaged":
    True}`` when no record can be built). ``record``: the record's dump without payloads, at
    ``call_index`` 0. ``trajectory_entry``: its ``ng_trajectory`` entry (a JSON-mode dump,
    payloads included), None when not valid on its own."""

    columns: dict[str, Any]
    record: dict[str, Any] | None
    trajectory_entry: dict[str, Any] | None

    @property
    def damaged(self) -> bool:
        return self.record is None


def at_position(dump: Mapping[str, Any], call_index: int) -> dict[str, Any]:
    """A record dump with its ``call_index`` set (the key keeps its place in the order)."""
    return {**dump, "call_index": call_index}


def record_text(record: Mapping[str, Any]) -> str:
    """The stored payload-free record (``capture_calls.record``): Gym's field order, not
    sorted; non-finite numbers kept as ``json.dumps`` writes them."""
    return compact_json(record, allow_nan=True)


def record_text_at(derived: DerivedCall, call_index: int) -> str:
    """``record_text`` of ``derived.record`` at ``call_index``."""
    assert derived.record is not None
    return record_text(at_position(derived.record, call_index))


def trajectory_entry_dump(call: Mapping[str, Any]) -> dict[str, Any] | None:
    """A call's entry in ``ng_trajectory.model_calls`` as the full projection dumps it, from its
    record dump WITH payloads; None when the entry is not valid on its own (then a record with
    this call is always rebuilt in full)."""
    try:
        entry = TrajectoryModelCall.model_validate(trajectory_model_call(call))
    except (ValidationError, ValueError):
        return None
    return entry.model_dump(mode="json")


def trajectory_entry(call: Mapping[str, Any]) -> str | None:
    """``trajectory_entry_dump`` as compact JSON: the entry's text in a full record."""
    entry = trajectory_entry_dump(call)
    return None if entry is None else compact_json(entry)


def derive_call(exchange: Any) -> DerivedCall:
    """The capture's derivation: its fields validated into Gym's ``ModelCallRecord`` and
    dumped, and its trajectory entry; ``_DAMAGED`` when the exchange makes no record."""
    try:
        fields = record_fields(exchange, 0)
        built = ModelCallRecord.model_validate(fields)
    except ValueError:  # pydantic's ValidationError is one
        return _DAMAGED
    record = built.model_dump(mode="json", exclude=_PAYLOADS)
    entry = trajectory_entry_dump(dump_with_payloads(record, exchange))
    return DerivedCall(_columns(record, len(built.tool_calls)), record, entry)


_DAMAGED = DerivedCall({"damaged": True}, None, None)


def _columns(record: Mapping[str, Any], tool_calls: int) -> dict[str, Any]:
    """The capture projection's normalised columns, from the record's dump."""
    model_ref = record["model_ref"]
    return {
        "damaged": False,
        "response_id": record["response_id"],
        "client_session_id": record["client_session_id"],
        "model_ref_name": model_ref["name"] if model_ref is not None else None,
        "model": record["model"],
        "dialect": record["dialect"],
        "status_code": record["status_code"],
        "response_status": record["response_status"],
        "finish_reason": record["finish_reason"],
        "error_category": record["error_category"],
        "started_at": record["started_at"],
        "completed_at": record["completed_at"],
        "latency_total_ms": record["latency_total_ms"],
        "latency_ttft_ms": record["latency_ttft_ms"],
        "tokens_in": record["tokens_in"],
        "tokens_out": record["tokens_out"],
        "tokens_reasoning": record["tokens_reasoning"],
        "tokens_total": record["tokens_total"],
        "cached_tokens": record["cached_tokens"],
        "cache_hit": record["cache_hit"],
        "cache_creation_tokens": record["cache_creation_tokens"],
        "num_tool_calls": tool_calls,
    }


def column_holds_nul(exchange: Any) -> bool:
    """Whether a string the capture view writes to a text column holds a NUL, which
    PostgreSQL's text cannot (the view would stop at the event). A NUL elsewhere in the
    exchange is kept, escaped, by the log and by the views' JSON texts."""
    model_call_id = exchange.get("model_call_id") if isinstance(exchange, Mapping) else None
    if isinstance(model_call_id, str) and "\x00" in model_call_id:
        return True
    columns = derive_call(exchange).columns
    return any(isinstance(value, str) and "\x00" in value for value in columns.values())


def derived_of(derived: object, exchange: Any) -> DerivedCall:
    """The derivation handed over with the event, else derived now."""
    return derived if isinstance(derived, DerivedCall) else derive_call(exchange)
