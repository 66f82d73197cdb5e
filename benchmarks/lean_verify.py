"""The "lean" leg of ``bench verify``: the least code that still does verify's job on the
projections that cost the most, so the figure beside ours says where the ceiling is.

It reads the log in the same pages, decodes every event as the replay does (payload parsed,
upcast, a capture's ``ModelCallRecord`` derived: ``EventDecoder``), keeps in memory only what
the capture and record projections hold (each rollout generation's positions, its latest
observation bundle and result; a clear or a tombstone forgets them), builds each rollout's
enriched record once, at the end, with the same Gym functions, and compares with the live
``capture_calls`` and ``observation_records`` rows streamed in key order. No scratch
database, no SQL writes, no projector machinery, no template check.

It does a strict subset of verify's work (no lineage, state, tool-call or gap rows; records
compared by their figures, not their text), so its events/s is an upper bound for any verify
that rebuilds the projections with these Gym functions in one Python process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from ledger.areas.captures.derivation import DerivedCall, at_position, record_text_at
from ledger.areas.captures.events import CAPTURE_CLEARED, MODEL_CALL_CAPTURED, MODEL_CALL_DAMAGED
from ledger.areas.captures.tables import capture_calls
from ledger.areas.observations.events import OBSERVATIONS_RECORDED, RESULT_RECORDED
from ledger.areas.observations.tables import observation_records
from ledger.gym.capture_attachment import build_capture_attachment
from ledger.gym.model_calls import ModelCallRecord, dump_with_payloads
from ledger.gym.record import RolloutEvidence, enrich_record
from ledger.gym.result import RolloutResult
from ledger.log.canonical import compact_json, parse_json
from ledger.log.events import Catalogue
from ledger.log.replay import EventDecoder
from ledger.log.rollout_events import ROLLOUT_DELETED
from ledger.log.verify import read_pages

# Compared per record: what the perf columns hold, built from the whole rollout.
_RECORD_FIGURES = ("num_model_calls", "prompt_tokens", "completion_tokens", "total_latency_ms")


@dataclass
class _Rollout:
    generation: int
    # (model_call_id, derivation, exchange) per position; (None, None, None): damaged.
    positions: list[tuple[str | None, DerivedCall | None, Any]] = field(default_factory=list)
    bundle: dict[str, Any] | None = None
    result: dict[str, Any] | None = None


def _same_text(stored: object, rebuilt: object) -> bool:
    if stored == rebuilt:
        return True
    if isinstance(stored, str) and isinstance(rebuilt, str):
        return bool(parse_json(stored) == parse_json(rebuilt))
    return False


def _figures(rollout_id: str, rollout: _Rollout) -> dict[str, Any]:
    records = [
        ModelCallRecord.model_validate(
            dump_with_payloads(at_position(derived.record, index), exchange)
        )
        for index, (_, derived, exchange) in enumerate(rollout.positions)
        if derived is not None and derived.record is not None
    ]
    capture = build_capture_attachment(rollout_id, records, [], include_payloads=True)
    result = RolloutResult.model_validate(rollout.result) if rollout.result else None
    record = enrich_record(
        RolloutEvidence(
            rollout_id=rollout_id, capture=capture, observations=rollout.bundle, result=result
        )
    )
    compact_json(record)  # the stored text's cost
    trajectory = record.get("ng_trajectory")
    perf: Mapping[str, Any] = record.get("ng_perf") or {}
    return {
        "num_model_calls": len(trajectory["model_calls"])
        if isinstance(trajectory, Mapping)
        else None,
        "prompt_tokens": perf.get("prompt_tokens"),
        "completion_tokens": perf.get("completion_tokens"),
        "total_latency_ms": perf.get("total_latency_ms"),
    }


async def lean_verify(engine: AsyncEngine, catalogue: Catalogue) -> tuple[int, int]:
    """(events decoded, differences found) for the log behind ``engine``."""
    decode = EventDecoder(catalogue)
    rollouts: dict[str, _Rollout] = {}
    events = 0
    async for rows in read_pages(engine):
        for row in rows:
            event = decode(row)
            events += 1
            rollout_id = event.rollout_id
            if rollout_id is None:
                continue
            if event.kind == ROLLOUT_DELETED:
                rollouts.pop(rollout_id, None)
                continue
            rollout = rollouts.get(rollout_id)
            if rollout is None or rollout.generation != event.generation:
                rollout = rollouts[rollout_id] = _Rollout(event.generation)
            payload = event.payload
            if event.kind == MODEL_CALL_CAPTURED and payload is not None:
                derived = event.derived
                assert isinstance(derived, DerivedCall)
                rollout.positions.append((payload["model_call_id"], derived, payload["exchange"]))
            elif event.kind == MODEL_CALL_DAMAGED:
                rollout.positions.append((None, None, None))
            elif event.kind == CAPTURE_CLEARED:
                rollout.positions = []
            elif event.kind == OBSERVATIONS_RECORDED and payload is not None:
                rollout.bundle = payload["bundle"]
            elif event.kind == RESULT_RECORDED and payload is not None:
                rollout.result = payload
    differences = 0
    async with engine.connect() as conn:
        query = select(capture_calls).order_by(*capture_calls.primary_key.columns)
        for call in (await conn.execute(query)).mappings():
            rollout = rollouts.get(call["rollout_id"])
            if rollout is None or call["call_index"] >= len(rollout.positions):
                differences += 1
                continue
            model_call_id, derived, _ = rollout.positions[call["call_index"]]
            if derived is None or derived.record is None:
                differences += not call["damaged"]
                continue
            record = record_text_at(derived, call["call_index"])
            differences += not _same_text(call["record"], record)
            differences += call["model_call_id"] != model_call_id
            differences += any(call[name] != value for name, value in derived.columns.items())
        query = select(observation_records).order_by(observation_records.c.rollout_id)
        for stored in (await conn.execute(query)).mappings():
            rollout = rollouts.get(stored["rollout_id"])
            if rollout is None:
                differences += 1
                continue
            figures = _figures(stored["rollout_id"], rollout)
            differences += any(stored[name] != figures[name] for name in _RECORD_FIGURES)
    return events, differences
