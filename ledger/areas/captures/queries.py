"""SQL of the captures area: decisions inside write commands (sync) and the one-read view."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    Select,
    String,
    Table,
    bindparam,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.captures.tables import (
    capture_call_counts,
    capture_calls,
    capture_pending,
    capture_positions,
    capture_state,
)
from ledger.gym.capture_attachment import capture_gaps
from ledger.log.canonical import parse_json
from ledger.log.driver import DriverQuery
from ledger.log.tables import events


@dataclass(frozen=True)
class CaptureState:
    """Per-rollout capture state of the current generation (all zero when never captured)."""

    rollout_id: str
    generation: int
    next_call_index: int = 0
    has_evidence: bool = False
    incomplete: bool = False
    pending_count: int = 0
    cleared_seq: int | None = None
    last_seq: int | None = None
    stored: bool = False
    """Whether a ``capture_state`` row exists for the id (whatever its generation)."""


@dataclass(frozen=True)
class CallCounts:
    """How many positions of a rollout generation are records and how many are damaged (the
    view's, ``capture_call_counts``: telling them apart is the derivation's)."""

    record_count: int = 0
    damaged_count: int = 0


@dataclass(frozen=True)
class StoredCall:
    """What a write decision needs to know about an already captured ``model_call_id``."""

    call_index: int
    seq: int
    exchange_sha256: str | None


@dataclass(frozen=True)
class CallRow:
    """One position of a rollout, as a read returns it."""

    call_index: int
    seq: int
    damaged: bool
    model_call_id: str | None
    record: dict[str, Any] | None
    """The record without payloads (None for a damaged position)."""
    payload: dict[str, Any] | None
    """The event payload (only when payloads were asked for; None if redacted)."""
    kind: str | None


@dataclass(frozen=True)
class CaptureView:
    state: CaptureState
    counts: CallCounts
    calls: list[CallRow]


def _state_from_row(row: Any) -> CaptureState:
    return CaptureState(
        rollout_id=row.rollout_id,
        generation=row.generation,
        next_call_index=row.next_call_index,
        has_evidence=bool(row.has_evidence),
        incomplete=bool(row.incomplete),
        pending_count=row.pending_count,
        cleared_seq=row.cleared_seq,
        last_seq=row.last_seq,
        stored=True,
    )


# The write path runs these for every capture: plain text statements built once skip
# SQLAlchemy's per-call expression construction and cache-key work (most of its cost).
_LOAD_STATE = DriverQuery(
    select(capture_state).where(capture_state.c.rollout_id == bindparam("rollout_id"))
)
_FIND_CALL = text(
    "SELECT call_index, seq, exchange_sha256 FROM capture_positions "
    "WHERE rollout_id = :rollout_id AND generation = :generation "
    "AND model_call_id = :model_call_id"
)


_LOOKUP = DriverQuery(
    text(
        "SELECT COALESCE(r.generation, 0) AS generation, s.generation AS state_generation, "
        "s.next_call_index, c.call_index, c.seq, c.exchange_sha256 "
        "FROM (SELECT CAST(:rollout_id AS VARCHAR(200)) AS rollout_id) k "
        "LEFT JOIN rollouts r ON r.rollout_id = k.rollout_id "
        "LEFT JOIN capture_state s ON s.rollout_id = k.rollout_id "
        "LEFT JOIN capture_positions c ON c.rollout_id = k.rollout_id "
        "AND c.generation = COALESCE(r.generation, 0) AND c.model_call_id = :model_call_id"
    ).columns(
        generation=Integer,
        state_generation=Integer,
        next_call_index=Integer,
        call_index=Integer,
        seq=BigInteger,
        exchange_sha256=String,
    )
)


@dataclass(frozen=True)
class CaptureLookup:
    """What an append decides on: the generation, the call already stored under the
    model_call_id (if any) and the next position."""

    generation: int
    existing: StoredCall | None
    next_call_index: int


def lookup_capture(conn: Connection, rollout_id: str, model_call_id: str) -> CaptureLookup:
    """The three facts an append needs, in one statement (it runs for every capture)."""
    row = _LOOKUP.first(conn, {"rollout_id": rollout_id, "model_call_id": model_call_id})
    assert row is not None  # the key row is always there
    generation = int(row.generation)
    existing = None
    if row.call_index is not None:
        existing = StoredCall(
            call_index=row.call_index, seq=row.seq, exchange_sha256=row.exchange_sha256
        )
    current = row.state_generation is not None and row.state_generation == generation
    return CaptureLookup(
        generation=generation,
        existing=existing,
        next_call_index=row.next_call_index if current else 0,
    )


# The same three facts for many model_call_ids of one rollout (a batch request): one row per
# call already stored under one of the ids, or a single row with NULL call columns.
_LOOKUP_MANY = text(
    "SELECT COALESCE(r.generation, 0) AS generation, s.generation AS state_generation, "
    "s.next_call_index, c.model_call_id, c.call_index, c.seq, c.exchange_sha256 "
    "FROM (SELECT CAST(:rollout_id AS VARCHAR(200)) AS rollout_id) k "
    "LEFT JOIN rollouts r ON r.rollout_id = k.rollout_id "
    "LEFT JOIN capture_state s ON s.rollout_id = k.rollout_id "
    "LEFT JOIN capture_positions c ON c.rollout_id = k.rollout_id "
    "AND c.generation = COALESCE(r.generation, 0) AND c.model_call_id IN :model_call_ids"
).bindparams(bindparam("model_call_ids", expanding=True))


@dataclass
class RolloutCaptureLookup:
    """What appends of many captures to one rollout decide on: the generation, the calls
    already stored under any of their model_call_ids, and the next position."""

    generation: int
    existing: dict[str, StoredCall]
    next_call_index: int


def lookup_captures(
    conn: Connection, rollout_id: str, model_call_ids: Collection[str]
) -> RolloutCaptureLookup:
    """``lookup_capture`` for many model_call_ids of one rollout, in one statement."""
    rows = conn.execute(
        _LOOKUP_MANY, {"rollout_id": rollout_id, "model_call_ids": list(model_call_ids)}
    ).all()
    first = rows[0]
    generation = int(first.generation)
    current = first.state_generation is not None and first.state_generation == generation
    return RolloutCaptureLookup(
        generation=generation,
        existing={
            row.model_call_id: StoredCall(
                call_index=row.call_index, seq=row.seq, exchange_sha256=row.exchange_sha256
            )
            for row in rows
            if row.call_index is not None
        },
        next_call_index=first.next_call_index if current else 0,
    )


def load_state(conn: Connection, rollout_id: str, generation: int) -> CaptureState:
    row = _LOAD_STATE.first(conn, {"rollout_id": rollout_id})
    if row is None or row.generation != generation:
        return CaptureState(rollout_id=rollout_id, generation=generation, stored=row is not None)
    return _state_from_row(row)


def state_and_counts_query(counts: Table) -> Select[Any]:
    """``load_state_and_counts``'s statement, the counts from ``counts`` (the stable table, or
    a build's: log/view_builds.py)."""
    return (
        select(capture_state, counts.c.record_count, counts.c.damaged_count)
        .select_from(
            capture_state.outerjoin(
                counts,
                (counts.c.rollout_id == capture_state.c.rollout_id)
                & (counts.c.generation == capture_state.c.generation),
            )
        )
        .where(capture_state.c.rollout_id == bindparam("rollout_id"))
    )


_LOAD_STATE_AND_COUNTS = state_and_counts_query(capture_call_counts)


def load_state_and_counts(
    conn: Connection,
    rollout_id: str,
    generation: int,
    *,
    query: Select[Any] = _LOAD_STATE_AND_COUNTS,
) -> tuple[CaptureState, CallCounts]:
    """``load_state`` and the capture view's counts of the same generation, in one statement
    (what a read of the merge gaps needs)."""
    row = conn.execute(query, {"rollout_id": rollout_id}).first()
    if row is None or row.generation != generation:
        state = CaptureState(rollout_id=rollout_id, generation=generation, stored=row is not None)
        return state, CallCounts()
    counts = CallCounts(record_count=row.record_count or 0, damaged_count=row.damaged_count or 0)
    return _state_from_row(row), counts


def merge_gaps(state: CaptureState, counts: CallCounts) -> list[dict[str, Any]]:
    """Gym's merge gaps of a rollout generation (§5.3), from its state and its counts."""
    return capture_gaps(
        has_evidence=state.has_evidence,
        record_count=counts.record_count,
        damaged_count=counts.damaged_count,
        incomplete=state.incomplete,
        pending=state.pending_count > 0,
    )


def find_call(
    conn: Connection, rollout_id: str, generation: int, model_call_id: str
) -> StoredCall | None:
    row = conn.execute(
        _FIND_CALL,
        {"rollout_id": rollout_id, "generation": generation, "model_call_id": model_call_id},
    ).first()
    if row is None:
        return None
    return StoredCall(call_index=row.call_index, seq=row.seq, exchange_sha256=row.exchange_sha256)


def is_pending(conn: Connection, rollout_id: str, generation: int, model_call_id: str) -> bool:
    row = conn.execute(
        select(capture_pending.c.announced_seq)
        .where(capture_pending.c.rollout_id == rollout_id)
        .where(capture_pending.c.generation == generation)
        .where(capture_pending.c.model_call_id == model_call_id)
    ).first()
    return row is not None


def capture_view(conn: Connection, rollout_id: str, with_payloads: bool) -> CaptureView:
    """The rollout's state and every position in ``call_index`` order, in ONE indexed query.

    ``capture_state`` (primary key) left-joined to ``capture_call_counts`` (primary key) and
    ``capture_calls`` (primary key prefix ``rollout_id, generation``), and to ``events`` by
    primary key when payloads are wanted.
    """
    columns: list[Any] = [
        capture_state,
        capture_call_counts.c.record_count,
        capture_call_counts.c.damaged_count,
        capture_calls.c.call_index,
        capture_calls.c.seq.label("call_seq"),
        capture_calls.c.damaged,
        capture_calls.c.model_call_id.label("call_model_call_id"),
        capture_calls.c.record,
    ]
    joined = capture_state.outerjoin(
        capture_call_counts,
        (capture_call_counts.c.rollout_id == capture_state.c.rollout_id)
        & (capture_call_counts.c.generation == capture_state.c.generation),
    ).outerjoin(
        capture_calls,
        (capture_calls.c.rollout_id == capture_state.c.rollout_id)
        & (capture_calls.c.generation == capture_state.c.generation),
    )
    if with_payloads:
        columns += [events.c.payload.label("event_payload"), events.c.kind.label("event_kind")]
        joined = joined.outerjoin(events, events.c.seq == capture_calls.c.seq)
    rows = conn.execute(
        select(*columns)
        .select_from(joined)
        .where(capture_state.c.rollout_id == rollout_id)
        .order_by(capture_calls.c.call_index)
    ).all()
    if not rows:
        state = CaptureState(rollout_id=rollout_id, generation=0)
        return CaptureView(state=state, counts=CallCounts(), calls=[])
    calls = []
    for row in rows:
        if row.call_index is None:
            continue
        calls.append(
            CallRow(
                call_index=row.call_index,
                seq=row.call_seq,
                damaged=bool(row.damaged),
                model_call_id=row.call_model_call_id,
                record=parse_json(row.record) if row.record is not None else None,
                payload=(
                    parse_json(row.event_payload)
                    if with_payloads and row.event_payload is not None
                    else None
                ),
                kind=row.event_kind if with_payloads else None,
            )
        )
    first = rows[0]
    counts = CallCounts(
        record_count=first.record_count or 0, damaged_count=first.damaged_count or 0
    )
    return CaptureView(state=_state_from_row(first), counts=counts, calls=calls)


@dataclass(frozen=True)
class PositionEvent:
    """One position of a rollout and its event (``kind`` None: the log lacks the seq)."""

    call_index: int
    seq: int
    kind: str | None
    payload: dict[str, Any] | None


async def read_positions(
    conn: AsyncConnection, rollout_id: str
) -> tuple[CaptureState, list[PositionEvent]]:
    """The rollout's write-side state and every position's event in ``call_index`` order: what
    the append has recorded, whether or not the capture view has followed yet (the mirror's
    files are made of these)."""
    return await conn.run_sync(_positions, rollout_id)


def _positions(conn: Connection, rollout_id: str) -> tuple[CaptureState, list[PositionEvent]]:
    joined = capture_state.outerjoin(
        capture_positions,
        (capture_positions.c.rollout_id == capture_state.c.rollout_id)
        & (capture_positions.c.generation == capture_state.c.generation),
    ).outerjoin(events, events.c.seq == capture_positions.c.seq)
    rows = conn.execute(
        select(
            capture_state,
            capture_positions.c.call_index,
            capture_positions.c.seq.label("position_seq"),
            events.c.kind.label("event_kind"),
            events.c.payload.label("event_payload"),
        )
        .select_from(joined)
        .where(capture_state.c.rollout_id == rollout_id)
        .order_by(capture_positions.c.call_index)
    ).all()
    if not rows:
        return CaptureState(rollout_id=rollout_id, generation=0), []
    found = [
        PositionEvent(
            call_index=row.call_index,
            seq=row.position_seq,
            kind=row.event_kind,
            payload=parse_json(row.event_payload) if row.event_payload is not None else None,
        )
        for row in rows
        if row.call_index is not None
    ]
    return _state_from_row(rows[0]), found
