"""The ``rollouts`` projection: each id's current generation and fence state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Table, bindparam

from ledger.log.driver import DriverStatement
from ledger.log.records import RolloutState, StoredEvent
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.log.tables import rollouts

LIVE = "live"
RETIRED = "retired"

# Compiled once and run on the driver (driver.py): this runs for every command. The SET
# clause follows the parameter keys: with "state" the event sets the fence state, without it the
# row keeps its state.
_UPDATE = DriverStatement(
    rollouts.update().where(rollouts.c.rollout_id == bindparam("b_rollout_id"))
)
_INSERT = DriverStatement(rollouts.insert())


def rollout_effect(event: StoredEvent) -> tuple[int, str | None]:
    """(generation, state) the row has after ``event``; state None: it keeps its state."""
    if event.kind == ROLLOUT_RETIRED:
        return event.generation, RETIRED
    if event.kind == ROLLOUT_DELETED:
        # The tombstone ends this generation: the id reads as unused from here on.
        return event.generation + 1, LIVE
    return event.generation, None


def rollout_after(current: RolloutState | None, event: StoredEvent) -> RolloutState:
    """The row ``apply`` leaves behind, computed without the database (the writer's cache)."""
    assert event.rollout_id is not None
    generation, state = rollout_effect(event)
    if current is None:
        return RolloutState(
            rollout_id=event.rollout_id,
            generation=generation,
            state=state or LIVE,
            first_seq=event.seq,
            last_seq=event.seq,
            created_at=event.recorded_at,
            updated_at=event.recorded_at,
        )
    return RolloutState(
        rollout_id=current.rollout_id,
        generation=generation,
        state=state or current.state,
        first_seq=current.first_seq,
        last_seq=event.seq,
        created_at=current.created_at,
        updated_at=event.recorded_at,
    )


@dataclass
class _RowChange:
    """A rollout's row after a run of its events (``apply_many``), to be written once."""

    # For the INSERT when the rollout has no row yet: its first event is the run's first.
    first_seq: int
    created_at: datetime
    generation: int
    # The fence state the last event that set one set; None: the row keeps its state.
    state: str | None
    last_seq: int
    updated_at: datetime


class RolloutsProjector:
    """Every event of a rollout rewrites its row; ``apply_many`` writes each rollout's row once
    for a run of events (a batch of 100 captures to one rollout costs one UPDATE, not 100).
    Within a command the writer's ``RolloutCache`` (updated by ``append``) answers
    ``tx.rollout()``."""

    name = "rollouts"
    version = 1
    follows_log = False
    tables: tuple[Table, ...] = (rollouts,)

    def handles(self, kind: str) -> bool:
        return True

    def apply(self, conn: Connection, event: StoredEvent) -> None:
        self.apply_many(conn, (event,))

    def apply_many(self, conn: Connection, events: Sequence[StoredEvent]) -> None:
        changes: dict[str, _RowChange] = {}
        for event in events:
            if event.rollout_id is None:
                continue
            generation, state = rollout_effect(event)
            row = changes.get(event.rollout_id)
            if row is None:
                changes[event.rollout_id] = _RowChange(
                    first_seq=event.seq,
                    created_at=event.recorded_at,
                    generation=generation,
                    state=state,
                    last_seq=event.seq,
                    updated_at=event.recorded_at,
                )
                continue
            row.generation = generation
            if state is not None:
                row.state = state
            row.last_seq = event.seq
            row.updated_at = event.recorded_at
        for rollout_id, row in changes.items():
            _write(conn, rollout_id, row)

    def flush(self, conn: Connection) -> None:
        """Nothing is deferred."""

    def discard(self) -> None:
        """Nothing is deferred."""


def _write(conn: Connection, rollout_id: str, row: _RowChange) -> None:
    values: dict[str, object] = {
        "b_rollout_id": rollout_id,
        "generation": row.generation,
        "last_seq": row.last_seq,
        "updated_at": row.updated_at,
    }
    if row.state is not None:
        values["state"] = row.state
    # UPDATE first, INSERT when no row was there: no SELECT. The result is the row per-event
    # writes leave: first_seq and created_at of the first event, the rest of the last one, the
    # state of the last event that set one (else kept, else live).
    if _UPDATE.execute(conn, values) == 0:
        _INSERT.execute(
            conn,
            {
                "rollout_id": rollout_id,
                "generation": row.generation,
                "state": row.state or LIVE,
                "first_seq": row.first_seq,
                "last_seq": row.last_seq,
                "created_at": row.created_at,
                "updated_at": row.updated_at,
            },
        )
