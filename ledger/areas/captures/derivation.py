"""What the views derive from a captured exchange, computed once per event.

A capture's view rows need its ``ModelCallRecord`` (the capture view's normalised columns and
payload-free record, the observations view's record with payloads and trajectory entry).
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

from ledger.gym import plain_dumps
from ledger.gym.model_calls import (
    PAYLOAD_FIELDS,
    ModelCallRecord,
    dump_with_payloads,
    record_fields,
)
from ledger.gym.trajectory import trajectory_model_call
from ledger.gym.trajectory_record import TrajectoryModelCall
from ledger.log.canonical import Checked, compact_json, is_plain_json

_PAYLOADS = set(PAYLOAD_FIELDS)


@dataclass(frozen=True)
class DerivedCall:
    """``columns``: the capture projection's normalised columns but ``record`` (``{"damaged":
    True}`` when no record can be built). ``record`` and ``call``: the record's dump without
    and with payloads, at ``call_index`` 0. ``trajectory_entry``: its ``ng_trajectory`` entry
    as compact JSON, None when not valid on its own."""

    columns: dict[str, Any]
    record: dict[str, Any] | None
    call: dict[str, Any] | None
    trajectory_entry: str | None
    # Found plain (``is_plain_json``): the record, and the call's payloads (``PAYLOAD_FIELDS``),
    # so the writer's texts of them (``record_text``, ``call_text``) do not walk them again.
    record_plain: bool = False
    payloads_plain: bool = False

    @property
    def damaged(self) -> bool:
        return self.record is None


def at_position(dump: Mapping[str, Any], call_index: int) -> dict[str, Any]:
    """A record dump with its ``call_index`` set (the key keeps its place in the order)."""
    return {**dump, "call_index": call_index}


def record_text(record: Mapping[str, Any], *, plain: bool = False) -> str:
    """The stored payload-free record (``capture_calls.record``): Gym's field order, not
    sorted; non-finite numbers kept as ``json.dumps`` writes them. ``plain``: found plain."""
    return compact_json(record, allow_nan=True, plain=plain)


def record_text_at(derived: DerivedCall, call_index: int) -> str:
    """``record_text`` of ``derived.record`` at ``call_index`` (the int position put in is plain
    JSON, so a record found plain at position 0 is plain at every position)."""
    assert derived.record is not None
    return record_text(at_position(derived.record, call_index), plain=derived.record_plain)


def trajectory_entry(call: Mapping[str, Any]) -> str | None:
    """A call's entry in ``ng_trajectory.model_calls`` as the full projection dumps it (compact
    JSON), from its record dump WITH payloads; None when the entry is not valid on its own
    (then a record with this call is always rebuilt in full)."""
    try:
        entry = TrajectoryModelCall.model_validate(trajectory_model_call(call))
    except (ValidationError, ValueError):
        return None
    return compact_json(entry.model_dump(mode="json"))


def derive_call(exchange: Any, *, plain: bool = False) -> DerivedCall:
    """The capture's derivation; by hand where pydantic would change nothing
    (``ledger.gym.plain_dumps``), else through the models. ``plain``: the caller has found the
    whole exchange plain (``is_plain_json``); else its payloads are checked here, once for the
    entry and the call's stored text both."""
    try:
        fields = record_fields(exchange, 0)
    except ValueError:
        return _DAMAGED
    record = plain_dumps.record_dump(fields)
    if record is None:
        return _validated(fields, exchange)
    record_plain = is_plain_json(record)
    call = dump_with_payloads(record, exchange)
    payloads_plain = plain or _payloads_plain(call)
    entry = plain_dumps.trajectory_entry_text(
        call, plain=_call_checked(record_plain, payloads_plain)
    )
    if isinstance(entry, plain_dumps.Ask):
        entry = trajectory_entry(call)
    columns = _columns(record, len(fields["tool_calls"]))
    return DerivedCall(columns, record, call, entry, record_plain, payloads_plain)


def _payloads_plain(call: Mapping[str, Any]) -> bool:
    return all(is_plain_json(call[name]) for name in PAYLOAD_FIELDS)


def call_text(derived: DerivedCall, call_index: int) -> str:
    """The stored call (``observation_calls.call``): ``derived.call`` at ``call_index`` as
    compact JSON, walking only what was not found plain (the call is the record's values and
    the payloads, the position an int, as in ``record_text_at``)."""
    assert derived.call is not None
    plain = _call_checked(derived.record_plain, derived.payloads_plain)
    return compact_json(at_position(derived.call, call_index), plain=plain)


def _call_checked(record_plain: bool, payloads_plain: bool) -> Checked:
    """What of a call (the record's values and the payloads) was found plain."""
    if not payloads_plain:
        return False
    return True if record_plain else PAYLOAD_FIELDS


_DAMAGED = DerivedCall({"damaged": True}, None, None, None)


def _validated(fields: dict[str, Any], exchange: Any) -> DerivedCall:
    try:
        built = ModelCallRecord.model_validate(fields)
    except ValueError:
        return _DAMAGED
    record = built.model_dump(mode="json", exclude=_PAYLOADS)
    call = dump_with_payloads(record, exchange)
    return DerivedCall(
        _columns(record, len(built.tool_calls)), record, call, trajectory_entry(call)
    )


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


def derived_of(derived: object, exchange: Any) -> DerivedCall:
    """The derivation handed over with the event, else derived now."""
    return derived if isinstance(derived, DerivedCall) else derive_call(exchange)
