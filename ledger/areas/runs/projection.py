"""The ``run_labels`` projection: a label row per labelled rollout generation; the tombstone
(``rollout.deleted``) ends the generation and its label with it."""

from __future__ import annotations

from sqlalchemy import Connection, Table, bindparam, delete

from ledger.areas.runs.events import ROLLOUT_LABELLED
from ledger.areas.runs.tables import run_labels
from ledger.log.driver import DriverStatement
from ledger.log.projector import Projector
from ledger.log.records import StoredEvent
from ledger.log.rollout_events import ROLLOUT_DELETED

_INSERT = DriverStatement(run_labels.insert())
_END_GENERATION = DriverStatement(
    delete(run_labels).where(
        run_labels.c.rollout_id == bindparam("rid"), run_labels.c.generation == bindparam("gen")
    )
)


class RunLabelProjector:
    name = "runs"
    version = 1
    follows_log = False
    tables: tuple[Table, ...] = (run_labels,)
    _KINDS = frozenset({ROLLOUT_LABELLED, ROLLOUT_DELETED})

    def handles(self, kind: str) -> bool:
        return kind in self._KINDS

    def flush(self, conn: Connection) -> None:
        """Nothing is deferred: a command reads the label it may have just written."""

    def discard(self) -> None:
        """Nothing is deferred."""

    def apply(self, conn: Connection, event: StoredEvent) -> None:
        if event.rollout_id is None:
            return
        if event.kind == ROLLOUT_DELETED:
            _END_GENERATION.execute(conn, {"rid": event.rollout_id, "gen": event.generation})
            return
        if event.payload is None:
            return  # redacted: an ended generation, whose label is gone anyway
        # The commands label a generation once (a different label is refused), so the row
        # is new; a rebuild replays the same events.
        _INSERT.execute(
            conn,
            {
                "rollout_id": event.rollout_id,
                "generation": event.generation,
                "run_label": event.payload["run"],
                "labelled_seq": event.seq,
            },
        )


def projectors() -> list[Projector]:
    return [RunLabelProjector()]
