"""The captures area's view: what each position's exchange says, behind the acknowledgement.

``capture_calls`` (the normalised columns for SQL and the record without payloads for reads) and
``capture_call_counts`` (records and damaged positions, for Gym's merge gaps) follow the log
(log/projection_follower.py): the append only records the position (``projection.py``), and
this view derives the record from the event (``derivation.py``) and puts it at the position the
write side gave that event, found by its seq in ``capture_positions``.

``capture_positions`` may already hold later events when a page is applied. A position a later
clear or tombstone removed is not found, and its event is skipped: the view applies that clear
or tombstone later in the same run, which would remove the row again, so what the view holds for
a rollout is right once it has applied the rollout's last event (what reads wait for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table, bindparam, select

from ledger.areas.captures.derivation import derived_of, record_text_at
from ledger.areas.captures.events import CAPTURE_CLEARED, MODEL_CALL_CAPTURED, MODEL_CALL_DAMAGED
from ledger.areas.captures.tables import capture_call_counts, capture_calls, capture_positions
from ledger.log.driver import DriverStatement
from ledger.log.ended_generations import EndedGenerations, delete_generations, delete_rollouts
from ledger.log.records import StoredEvent
from ledger.log.rollout_events import ROLLOUT_DELETED
from ledger.log.view_builds import build_tables

_POSITION_KINDS = frozenset({MODEL_CALL_CAPTURED, MODEL_CALL_DAMAGED})
_HANDLED = _POSITION_KINDS | {CAPTURE_CLEARED, ROLLOUT_DELETED}
_CALL_COLUMNS = [column.name for column in capture_calls.columns]
_DAMAGED_ROW = dict.fromkeys(_CALL_COLUMNS) | {"damaged": True}


class _Statements:
    """The view's statements on the tables of one build (log/view_builds.py), built once."""

    def __init__(self, calls: Table, counts: Table) -> None:
        self.calls, self.counts = calls, counts
        self.insert_call = DriverStatement(calls.insert())
        self.insert_counts = DriverStatement(counts.insert())
        self.update_counts = DriverStatement(
            counts.update().where(counts.c.rollout_id == bindparam("b_rollout_id"))
        )
        self.forget_calls = DriverStatement(
            calls.delete()
            .where(calls.c.rollout_id == bindparam("b_rollout_id"))
            .where(calls.c.generation == bindparam("b_generation"))
        )
        self.counts_of = select(
            counts.c.generation, counts.c.record_count, counts.c.damaged_count
        ).where(counts.c.rollout_id == bindparam("rollout_id"))


# The positions of the events in a run of seqs (by ``ix_capture_positions_seq``): only
# position events have one, so a page's range finds at most a page of rows. The positions are
# the write side's: one table whatever the build.
_POSITIONS = select(capture_positions.c.seq, capture_positions.c.call_index).where(
    capture_positions.c.seq.between(bindparam("first"), bindparam("last"))
)


@dataclass
class _Counts:
    generation: int
    record_count: int = 0
    damaged_count: int = 0
    # Whether the table holds a row for the rollout (whatever its generation).
    stored: bool = False


def call_row(event: StoredEvent, rollout_id: str, call_index: int) -> dict[str, Any]:
    """The ``capture_calls`` row of a position event (its payload not redacted)."""
    payload = event.payload
    assert payload is not None
    row = dict(_DAMAGED_ROW)
    if event.kind == MODEL_CALL_CAPTURED:
        derived = derived_of(event.derived, payload["exchange"])
        row.update(derived.columns)
        if derived.record is not None:
            # Field order kept (not sorted): reads hand the record out as Gym orders it.
            row["record"] = record_text_at(derived, call_index)
        row["model_call_id"] = payload["model_call_id"]
        row["exchange_sha256"] = event.payload_sha256
    row.update(
        rollout_id=rollout_id, generation=event.generation, call_index=call_index, seq=event.seq
    )
    return row


class CaptureCallsView:
    """Writes a position's call row in ``apply`` (inside ``apply_many``, the page's rows in one
    ``executemany``) and keeps each touched rollout's counts in memory until ``flush``."""

    name = "capture_calls"
    version = 1
    follows_log = True

    def __init__(self, build: int | None = None) -> None:
        """``build``: the build whose tables it writes (log/view_builds.py); None, the stable
        tables themselves (a scratch replay)."""
        self.tables: tuple[Table, ...] = build_tables((capture_calls, capture_call_counts), build)
        self._sql = _Statements(*self.tables)
        self._counts: dict[str, _Counts] = {}
        self._unwritten: dict[str, None] = {}
        # Inside ``apply_many``: the positions of its events, and the rows not inserted yet.
        self._positions: dict[int, int] | None = None
        self._rows: list[dict[str, Any]] | None = None
        self._ended = EndedGenerations()

    def handles(self, kind: str) -> bool:
        return kind in _HANDLED

    def apply_many(self, conn: Connection, events: Sequence[StoredEvent]) -> None:
        """``apply`` of each event in turn (``AppliesMany``), the positions read with one
        statement and the rows inserted together."""
        found = conn.execute(_POSITIONS, {"first": events[0].seq, "last": events[-1].seq})
        self._positions = {int(seq): int(call_index) for seq, call_index in found}
        self._rows = []
        try:
            for event in events:
                self.apply(conn, event)
            self._insert_kept_rows(conn)
        finally:
            self._positions = None
            self._rows = None

    def apply(self, conn: Connection, event: StoredEvent) -> None:
        rollout_id = event.rollout_id
        if rollout_id is None:
            return
        if event.kind == ROLLOUT_DELETED:
            self._insert_kept_rows(conn)
            self._ended.add(rollout_id, event.generation)
            self._counts.pop(rollout_id, None)
            self._unwritten.pop(rollout_id, None)
            return
        self._remove_ended(conn)
        if event.kind == CAPTURE_CLEARED:
            self._insert_kept_rows(conn)
            self._sql.forget_calls.execute(
                conn, {"b_rollout_id": rollout_id, "b_generation": event.generation}
            )
            counts = self._counts_of(conn, rollout_id, event.generation)
            counts.record_count = counts.damaged_count = 0
            self._unwritten[rollout_id] = None
            return
        if event.payload is None:
            return  # redacted: an ended generation, whose rows its tombstone removes
        call_index = self._position_of(conn, event.seq)
        if call_index is None:
            return  # a later clear or tombstone removed the position (module docstring)
        row = call_row(event, rollout_id, call_index)
        if self._rows is None:
            self._sql.insert_call.execute(conn, row)
        else:
            self._rows.append(row)
        counts = self._counts_of(conn, rollout_id, event.generation)
        if row["damaged"]:
            counts.damaged_count += 1
        else:
            counts.record_count += 1
        self._unwritten[rollout_id] = None

    def _position_of(self, conn: Connection, seq: int) -> int | None:
        if self._positions is not None:
            return self._positions.get(seq)
        found = conn.execute(_POSITIONS, {"first": seq, "last": seq}).first()
        return None if found is None else int(found.call_index)

    def _counts_of(self, conn: Connection, rollout_id: str, generation: int) -> _Counts:
        counts = self._counts.get(rollout_id)
        if counts is None:
            row = conn.execute(self._sql.counts_of, {"rollout_id": rollout_id}).first()
            if row is None:
                counts = _Counts(generation)
            elif row.generation == generation:
                counts = _Counts(generation, row.record_count, row.damaged_count, stored=True)
            else:
                counts = _Counts(generation, stored=True)
            self._counts[rollout_id] = counts
        elif counts.generation != generation:
            counts = self._counts[rollout_id] = _Counts(generation, stored=counts.stored)
        return counts

    def _insert_kept_rows(self, conn: Connection) -> None:
        if self._rows:
            rows, self._rows = self._rows, []
            self._sql.insert_call.execute_many(conn, rows)

    def _remove_ended(self, conn: Connection) -> None:
        if self._ended:
            ended = self._ended.take()
            delete_generations(conn, self._sql.calls, ended)
            delete_rollouts(conn, self._sql.counts, ended)

    def flush(self, conn: Connection) -> None:
        self._remove_ended(conn)
        unwritten, self._unwritten = self._unwritten, {}
        for rollout_id in unwritten:
            counts = self._counts[rollout_id]
            values = {
                "generation": counts.generation,
                "record_count": counts.record_count,
                "damaged_count": counts.damaged_count,
            }
            if counts.stored:
                self._sql.update_counts.execute(conn, {**values, "b_rollout_id": rollout_id})
            else:
                self._sql.insert_counts.execute(conn, {**values, "rollout_id": rollout_id})
                counts.stored = True
        self._counts = {}

    def discard(self) -> None:
        self._counts = {}
        self._unwritten = {}
        self._ended.clear()


__all__ = ["CaptureCallsView", "call_row"]
