"""The ``rollouts`` projection: each id's current generation and fence state."""

from __future__ import annotations

from sqlalchemy import Connection, Table, bindparam

from ledger.events.rollout import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.store.driver import DriverStatement
from ledger.store.records import RolloutState, StoredEvent
from ledger.store.schema import rollouts

LIVE = "live"
RETIRED = "retired"

# Compiled once and run on the driver (store/driver.py): this runs for every event. The SET
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


class RolloutsProjector:
    name = "rollouts"
    tables: tuple[Table, ...] = (rollouts,)

    def handles(self, kind: str) -> bool:
        return True

    def flush(self, conn: Connection) -> None:
        """Nothing is deferred: ``apply`` writes every row."""

    def discard(self) -> None:
        """Nothing is deferred."""

    def apply(self, conn: Connection, event: StoredEvent) -> None:
        if event.rollout_id is None:
            return
        generation, state = rollout_effect(event)
        changes: dict[str, object] = {
            "b_rollout_id": event.rollout_id,
            "generation": generation,
            "last_seq": event.seq,
            "updated_at": event.recorded_at,
        }
        if state is not None:
            changes["state"] = state
        # UPDATE first, INSERT when no row was there: one statement for every event but a
        # rollout's first, and no SELECT.
        if _UPDATE.execute(conn, changes) == 0:
            _INSERT.execute(
                conn,
                {
                    "rollout_id": event.rollout_id,
                    "generation": generation,
                    "state": state or LIVE,
                    "first_seq": event.seq,
                    "last_seq": event.seq,
                    "created_at": event.recorded_at,
                    "updated_at": event.recorded_at,
                },
            )
