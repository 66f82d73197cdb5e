"""The ``rollouts`` projection: each id's current generation and fence state."""

from __future__ import annotations

from sqlalchemy import Connection, Table, bindparam, select

from ledger.events.rollout import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.store.records import StoredEvent
from ledger.store.schema import rollouts

# Built once: this projector runs for every event with a rollout id.
_CURRENT = select(rollouts.c.generation, rollouts.c.state).where(
    rollouts.c.rollout_id == bindparam("rollout_id")
)
_INSERT = rollouts.insert()
_UPDATE = rollouts.update().where(rollouts.c.rollout_id == bindparam("key"))

LIVE = "live"
RETIRED = "retired"


class RolloutsProjector:
    name = "rollouts"
    tables: tuple[Table, ...] = (rollouts,)

    def handles(self, kind: str) -> bool:
        return True

    def apply(self, conn: Connection, event: StoredEvent) -> None:
        if event.rollout_id is None:
            return
        current = conn.execute(_CURRENT, {"rollout_id": event.rollout_id}).first()
        generation = event.generation
        state = current.state if current is not None else LIVE
        if event.kind == ROLLOUT_RETIRED:
            state = RETIRED
        elif event.kind == ROLLOUT_DELETED:
            # The tombstone ends this generation: the id reads as unused from here on.
            generation = event.generation + 1
            state = LIVE
        if current is None:
            conn.execute(
                _INSERT,
                {
                    "rollout_id": event.rollout_id,
                    "generation": generation,
                    "state": state,
                    "first_seq": event.seq,
                    "last_seq": event.seq,
                    "created_at": event.recorded_at,
                    "updated_at": event.recorded_at,
                },
            )
        else:
            conn.execute(
                _UPDATE,
                {
                    "key": event.rollout_id,
                    "generation": generation,
                    "state": state,
                    "last_seq": event.seq,
                    "updated_at": event.recorded_at,
                },
            )
