"""Lineage commands (run inside the writer, against projections) and lineage read queries.

Every decision that depends on state (fenced? duplicate? conflicting? held?) is made inside a
writer command, so it is serialised with every other append: once a retire is acknowledged, no
row can be recorded into that generation any more, on any replica.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, Row, Select, and_, bindparam, exists, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.lineage.events import (
    FAILURE_RECORDED,
    REMOVAL_HOLD_RELEASED,
    REMOVAL_HOLD_SET,
    ROW_DISCARDED,
    ROW_RECORDED,
    RowDiscarded,
)
from ledger.areas.lineage.tables import lineage_discarded, lineage_removal_hold, lineage_rows
from ledger.gym.lineage import staging_key_of
from ledger.log.canonical import sha256_hex, standard_json
from ledger.log.errors import Conflict, RolloutRetiredError
from ledger.log.records import NewEvent, as_utc
from ledger.log.rollout_events import (
    ROLLOUT_DELETED,
    ROLLOUT_RETIRED,
    RolloutDeleted,
    RolloutRetired,
)
from ledger.log.rollouts_projection import RETIRED
from ledger.log.tables import events, rollouts
from ledger.log.transaction import WriteTransaction

Outcome = Literal["recorded", "duplicate", "discarded"]


@dataclass(frozen=True)
class RecordResult:
    outcome: Outcome
    seq: int | None
    generation: int
    staging_key: str | None = None


@dataclass
class RemovalResult:
    removed: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    fenced: int = 0
    """How many fences this command wrote (retire only)."""


class RemovalHeld(Conflict):
    """Retire/delete refused while an operator's removal hold is set (409 with its reason)."""


def conflicting_row_message(model_call_id: str) -> str:
    return f"conflicting lineage record for model call {model_call_id}"


# --- commands (synchronous, inside the writer transaction) -------------------------------


# Statements built once: SQLAlchemy memoises a statement's cache key per object, which keeps a
# retire of 4096 ids close to the cost of its SQL.
#
# The lookups by model_call_id and by fingerprint have no ORDER BY: their rows are sorted by seq
# in Python. With ``ORDER BY seq`` SQLite's planner walks the rollout's primary key (rollout,
# generation, seq), which returns seq order, and tests every row of the generation, rather than
# the index on the column looked up: each record of a rollout's n-th call read n rows.
_SAME_CALL = select(lineage_rows.c.seq, lineage_rows.c.row_sha256, lineage_rows.c.row_kind).where(
    lineage_rows.c.rollout_id == bindparam("rid"),
    lineage_rows.c.generation == bindparam("gen"),
    lineage_rows.c.model_call_id == bindparam("mcid"),
)
_HAS_EVENTS = select(
    exists().where(events.c.rollout_id == bindparam("rid"), events.c.generation == bindparam("gen"))
)
_HOLD_REASON = select(lineage_removal_hold.c.reason)


def _in_seq_order(rows: Iterable[Row[Any]]) -> list[Row[Any]]:
    return sorted(rows, key=lambda row: int(row.seq))


def _current(tx: WriteTransaction, rollout_id: str) -> tuple[int, bool]:
    """(current generation, fenced?) of a rollout; an unseen id is generation 0, live."""
    state = tx.rollout(rollout_id)
    if state is None:
        return 0, False
    return state.generation, state.state == RETIRED


def record_row(tx: WriteTransaction, rollout_id: str, row: dict[str, Any]) -> RecordResult:
    """Record one ledger row (committed or failure) for the rollout's current generation."""
    is_failure = "failure_reason" in row
    generation, fenced = _current(tx, rollout_id)
    model_call_id = str(row["model_call_id"])
    row_sha = sha256_hex(standard_json(row).encode())
    same_call = _in_seq_order(
        tx.conn.execute(_SAME_CALL, {"rid": rollout_id, "gen": generation, "mcid": model_call_id})
    )
    for existing in same_call:
        if existing.row_sha256 == row_sha:
            # Identical re-record (also after a fence: the row is in the ledger the trainer read).
            return RecordResult("duplicate", int(existing.seq), generation, staging_key_of(row))
    if fenced:
        appended = tx.append(
            ROW_DISCARDED,
            RowDiscarded(
                rollout_id=rollout_id,
                generation=generation,
                model_call_id=model_call_id,
                staging_key=staging_key_of(row),
                row=row,
            ),
        )
        return RecordResult("discarded", appended.event.seq, generation, staging_key_of(row))
    if not is_failure and any(e.row_kind != "failure" for e in same_call):
        raise Conflict(conflicting_row_message(model_call_id))
    if is_failure:
        appended = tx.append(FAILURE_RECORDED, row, rollout_id=rollout_id)
    else:
        appended = tx.append(ROW_RECORDED, {"row": row}, rollout_id=rollout_id)
    return RecordResult("recorded", appended.event.seq, generation, staging_key_of(row))


def _check_hold(tx: WriteTransaction) -> None:
    reason = tx.conn.execute(_HOLD_REASON).scalar()
    if reason is not None:
        raise RemovalHeld(str(reason))


_PREFETCH_CHUNK = 500  # ids per IN (...) list: well inside every backend's parameter limit


@dataclass(frozen=True)
class _BatchState:
    """The state of a whole batch of ids, read in a few queries instead of a few per id."""

    generation: dict[str, int]
    fenced: set[str]
    with_rows: set[str]
    with_events: set[str]


def _batch_state(
    tx: WriteTransaction, rollout_ids: Sequence[str], *, events_too: bool = False
) -> _BatchState:
    generation: dict[str, int] = {}
    fenced: set[str] = set()
    with_rows: set[str] = set()
    with_events: set[str] = set()
    # Through the writer's cache, so the appends that follow do not read each row again.
    for rollout_id, known in tx.rollouts_of(rollout_ids).items():
        if known is not None:
            generation[rollout_id] = known.generation
            if known.state == RETIRED:
                fenced.add(rollout_id)
    if events_too:
        tx.write_events()  # the query below reads the events table
    for start in range(0, len(rollout_ids), _PREFETCH_CHUNK):
        chunk = list(rollout_ids[start : start + _PREFETCH_CHUNK])
        # One index probe per id (EXISTS), not every row of each ledger (a join + DISTINCT).
        current_rows = select(rollouts.c.rollout_id).where(
            rollouts.c.rollout_id.in_(chunk),
            exists().where(
                lineage_rows.c.rollout_id == rollouts.c.rollout_id,
                lineage_rows.c.generation == rollouts.c.generation,
            ),
        )
        with_rows.update(row.rollout_id for row in tx.conn.execute(current_rows))
        if events_too:
            current_events = select(rollouts.c.rollout_id).where(
                rollouts.c.rollout_id.in_(chunk),
                exists().where(
                    events.c.rollout_id == rollouts.c.rollout_id,
                    events.c.generation == rollouts.c.generation,
                ),
            )
            with_events.update(row.rollout_id for row in tx.conn.execute(current_events))
    return _BatchState(generation, fenced, with_rows, with_events)


def retire(tx: WriteTransaction, rollout_ids: Sequence[str]) -> RemovalResult:
    """Fence every id (validated and de-duplicated by the caller); ``removed`` = had rows."""
    _check_hold(tx)
    state = _batch_state(tx, rollout_ids)
    result = RemovalResult()
    fences: list[NewEvent] = []
    for rollout_id in rollout_ids:
        if rollout_id in state.fenced:
            result.absent.append(rollout_id)  # retiring again changes nothing
            continue
        had_rows = rollout_id in state.with_rows
        fences.append(_fence_event(rollout_id, had_rows=had_rows))
        result.fenced += 1
        (result.removed if had_rows else result.absent).append(rollout_id)
    tx.append_many(fences)
    return result


def _fence_event(rollout_id: str, *, had_rows: bool) -> NewEvent:
    return NewEvent(ROLLOUT_RETIRED, RolloutRetired(had_rows=had_rows), rollout_id=rollout_id)


@dataclass
class ImportedLedger:
    recorded: int = 0
    duplicates: int = 0
    conflicts: list[str] = field(default_factory=list)
    fenced: bool = False
    already_fenced: bool = False


def import_ledger(
    tx: WriteTransaction, rollout_id: str, rows: Sequence[dict[str, Any]], *, fence: bool
) -> ImportedLedger:
    """Bring one Gym ledger (rows in file order, then its fence) into the current generation.

    Idempotent: a rollout already fenced is left alone (its rows were imported with the fence,
    or it was retired here since), identical rows are duplicates. A Gym fence is restored even
    while a removal hold is set: importing a fence records a removal that already happened.
    """
    result = ImportedLedger()
    generation, fenced = _current(tx, rollout_id)
    if fenced:
        result.already_fenced = True
        result.duplicates = len(rows)
        return result
    for row in rows:
        try:
            outcome = record_row(tx, rollout_id, row)
        except Conflict as exc:  # raised before anything was appended for this row
            result.conflicts.append(exc.message)
            continue
        if outcome.outcome == "recorded":
            result.recorded += 1
        else:
            result.duplicates += 1
    if fence:
        had_rows = _has_rows_now(tx, rollout_id, generation)
        tx.append_many([_fence_event(rollout_id, had_rows=had_rows)])
        result.fenced = True
    return result


def _has_rows_now(tx: WriteTransaction, rollout_id: str, generation: int) -> bool:
    query = select(
        exists().where(
            lineage_rows.c.rollout_id == rollout_id, lineage_rows.c.generation == generation
        )
    )
    return bool(tx.conn.execute(query).scalar())


def delete(tx: WriteTransaction, rollout_ids: Sequence[str]) -> RemovalResult:
    """End the generation of every id that has one; ``removed`` = had rows."""
    _check_hold(tx)
    state = _batch_state(tx, rollout_ids, events_too=True)
    result = RemovalResult()
    tombstones: list[NewEvent] = []
    for rollout_id in rollout_ids:
        # An id never seen, or whose current generation holds nothing, already reads as unused.
        if rollout_id not in state.with_events:
            result.absent.append(rollout_id)
            continue
        # Retire already removed a fenced generation's ledger: deleting it removes only the
        # fence, so such an id is absent (Gym: "a fenced-only id is absent").
        had_rows = rollout_id in state.with_rows and rollout_id not in state.fenced
        tombstones.append(
            NewEvent(ROLLOUT_DELETED, RolloutDeleted(had_rows=had_rows), rollout_id=rollout_id)
        )
        (result.removed if had_rows else result.absent).append(rollout_id)
    tx.append_many(tombstones)
    return result


def set_hold(tx: WriteTransaction, reason: str) -> bool:
    """Set (or change) the removal hold; False if it was already set with this reason."""
    current = tx.conn.execute(_HOLD_REASON).scalar()
    if current == reason:
        return False
    tx.append(REMOVAL_HOLD_SET, {"reason": reason})
    return True


def release_hold(tx: WriteTransaction) -> bool:
    """Release the hold; False if none was set."""
    if tx.conn.execute(_HOLD_REASON).scalar() is None:
        return False
    tx.append(REMOVAL_HOLD_RELEASED, {})
    return True


# --- reads (async, read-only connections) -------------------------------------------------


@dataclass(frozen=True)
class LedgerView:
    """A rollout's current generation as one query sees it."""

    generation: int
    retired: bool
    rows: list[dict[str, Any]]


async def ledger_view(conn: AsyncConnection, rollout_id: str) -> LedgerView:
    """``read_ledger_view`` on an async connection."""
    return await conn.run_sync(read_ledger_view, rollout_id)


def read_ledger_view(conn: Connection, rollout_id: str) -> LedgerView:
    """State and rows of the current generation, in ledger order, in ONE indexed query."""
    query = (
        select(rollouts.c.generation, rollouts.c.state, lineage_rows.c.row)
        .select_from(
            rollouts.outerjoin(
                lineage_rows,
                and_(
                    lineage_rows.c.rollout_id == rollouts.c.rollout_id,
                    lineage_rows.c.generation == rollouts.c.generation,
                ),
            )
        )
        .where(rollouts.c.rollout_id == rollout_id)
        .order_by(lineage_rows.c.seq)
    )
    result = conn.execute(query).all()
    if not result:
        return LedgerView(generation=0, retired=False, rows=[])
    first = result[0]
    rows = [json.loads(r.row) for r in result if r.row is not None]
    return LedgerView(generation=int(first.generation), retired=first.state == RETIRED, rows=rows)


_GENERATION = select(rollouts.c.generation, rollouts.c.state).where(
    rollouts.c.rollout_id == bindparam("rid")
)


def unfenced_generation(conn: Connection, rollout_id: str) -> int:
    """The rollout's current generation (0 when unknown); RolloutRetiredError when fenced."""
    row = conn.execute(_GENERATION, {"rid": rollout_id}).first()
    if row is None:
        return 0
    if row.state == RETIRED:
        raise RolloutRetiredError(rollout_id)
    return int(row.generation)


def generation_has_rows(conn: Connection, rollout_id: str, generation: int) -> bool:
    """Any row (committed, lineage-only or failure) in this generation."""
    query = select(
        exists().where(
            lineage_rows.c.rollout_id == rollout_id, lineage_rows.c.generation == generation
        )
    )
    return bool(conn.execute(query).scalar())


def find_rows(
    conn: Connection,
    rollout_id: str,
    generation: int,
    *,
    fingerprint: str | None = None,
    model_call_id: str | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """Committed rows (never failures) matching a fingerprint and/or a model_call_id, in seq
    order."""
    query = _FIND_ROWS[(fingerprint is not None, model_call_id is not None)]
    found = conn.execute(
        query, {"rid": rollout_id, "gen": generation, "fp": fingerprint, "mcid": model_call_id}
    )
    return [(int(r.seq), json.loads(r.row)) for r in _in_seq_order(found)]


def _find_rows_by(*, fingerprint: bool, model_call_id: bool) -> Select[Any]:
    query = select(lineage_rows.c.seq, lineage_rows.c.row).where(
        lineage_rows.c.rollout_id == bindparam("rid"),
        lineage_rows.c.generation == bindparam("gen"),
        lineage_rows.c.row_kind != "failure",
    )
    if fingerprint:
        query = query.where(lineage_rows.c.fingerprint == bindparam("fp"))
    if model_call_id:
        query = query.where(lineage_rows.c.model_call_id == bindparam("mcid"))
    return query


# By (fingerprint given, model_call_id given); no ORDER BY, as for _SAME_CALL.
_FIND_ROWS = {
    (by_fingerprint, by_id): _find_rows_by(fingerprint=by_fingerprint, model_call_id=by_id)
    for by_fingerprint in (False, True)
    for by_id in (False, True)
}


@dataclass(frozen=True)
class OrphanedStagingKey:
    seq: int
    rollout_id: str
    generation: int
    model_call_id: str
    staging_key: str
    discarded_at: datetime


async def orphaned_staging_keys(
    conn: AsyncConnection, *, after: int, limit: int
) -> list[OrphanedStagingKey]:
    query = (
        select(lineage_discarded)
        .where(lineage_discarded.c.seq > after, lineage_discarded.c.staging_key.is_not(None))
        .order_by(lineage_discarded.c.seq)
        .limit(limit)
    )
    return [
        OrphanedStagingKey(
            seq=int(r.seq),
            rollout_id=r.rollout_id,
            generation=int(r.generation),
            model_call_id=r.model_call_id,
            staging_key=r.staging_key,
            discarded_at=as_utc(r.discarded_at),
        )
        for r in (await conn.execute(query)).all()
    ]


@dataclass(frozen=True)
class RemovalHold:
    reason: str
    set_seq: int
    set_at: datetime


async def removal_hold(conn: AsyncConnection) -> RemovalHold | None:
    row = (await conn.execute(select(lineage_removal_hold))).first()
    if row is None:
        return None
    return RemovalHold(reason=row.reason, set_seq=int(row.set_seq), set_at=as_utc(row.set_at))
