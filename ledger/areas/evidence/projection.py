"""The ``evidence_calls`` projection (read through the ``call_evidence`` view): for each
rollout generation, every model call id the log knows from a lineage row (committed or
failure), an intent, or a capture, and which of the three it has.

One statement per event: an upsert that keeps the first seq of each kind (a repeat of a row,
an intent or a capture changes nothing). ``capture.cleared`` forgets the captures (the calls'
rows and intents stay: the call was admitted whatever happened to its capture file) and drops
the calls known from a capture only; ``rollout.deleted`` ends the generation and its rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Table, and_, bindparam, delete, func, update
from sqlalchemy.dialects import postgresql, sqlite

from ledger.areas.captures.events import CAPTURE_CLEARED, MODEL_CALL_CAPTURED
from ledger.areas.evidence.events import MODEL_CALL_INTENT_RECORDED
from ledger.areas.evidence.tables import evidence_calls as ce
from ledger.areas.lineage.events import FAILURE_RECORDED, ROW_RECORDED
from ledger.log.driver import DriverStatement
from ledger.log.projector import Projector
from ledger.log.records import StoredEvent
from ledger.log.rollout_events import ROLLOUT_DELETED

ROW_KINDS = {ROW_RECORDED: "call", FAILURE_RECORDED: "failure"}

_KEY = and_(ce.c.rollout_id == bindparam("rid"), ce.c.generation == bindparam("gen"))
_END_GENERATION = DriverStatement(delete(ce).where(_KEY))
_FORGET_CAPTURES = DriverStatement(update(ce).where(_KEY, ce.c.capture_seq.is_not(None)))
_DROP_CAPTURE_ONLY = DriverStatement(
    delete(ce).where(_KEY, ce.c.row_seq.is_(None), ce.c.intent_seq.is_(None))
)

# Which columns each kind of evidence sets (the first value wins).
_ROW_COLUMNS = ("row_seq", "row_kind", "admitted_at")
_INTENT_COLUMNS = ("intent_seq", "admitted_at")
_CAPTURE_COLUMNS = ("capture_seq",)


def _upsert(dialect: str, columns: tuple[str, ...]) -> DriverStatement:
    """INSERT the call, or on its key keep each column's first non-NULL value."""
    make: Callable[..., Any] = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = make(ce)
    keep_first = {name: func.coalesce(ce.c[name], statement.excluded[name]) for name in columns}
    return DriverStatement(
        statement.on_conflict_do_update(
            index_elements=[ce.c.rollout_id, ce.c.generation, ce.c.model_call_id], set_=keep_first
        )
    )


class CallEvidenceProjector:
    name = "evidence"
    version = 1
    follows_log = False
    tables: tuple[Table, ...] = (ce,)
    _KINDS = frozenset(
        {
            ROW_RECORDED,
            FAILURE_RECORDED,
            MODEL_CALL_INTENT_RECORDED,
            MODEL_CALL_CAPTURED,
            CAPTURE_CLEARED,
            ROLLOUT_DELETED,
        }
    )

    def __init__(self) -> None:
        self._statements: dict[tuple[str, str], DriverStatement] = {}

    def handles(self, kind: str) -> bool:
        return kind in self._KINDS

    def flush(self, conn: Connection) -> None:
        """Nothing is deferred: one statement per event."""

    def discard(self) -> None:
        """Nothing is deferred."""

    def _upsert(self, conn: Connection, evidence: str, columns: tuple[str, ...]) -> DriverStatement:
        key = (conn.dialect.name, evidence)
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = _upsert(conn.dialect.name, columns)
        return statement

    def apply(self, conn: Connection, event: StoredEvent) -> None:
        rollout_id = event.rollout_id
        if rollout_id is None:
            return
        key = {"rid": rollout_id, "gen": event.generation}
        if event.kind == ROLLOUT_DELETED:
            _END_GENERATION.execute(conn, key)
            return
        if event.kind == CAPTURE_CLEARED:
            _FORGET_CAPTURES.execute(conn, {**key, "capture_seq": None})
            _DROP_CAPTURE_ONLY.execute(conn, key)
            return
        payload = event.payload
        if payload is None:
            return  # redacted: an ended generation, whose rows are gone anyway
        model_call_id = payload.get("model_call_id")
        if event.kind == ROW_RECORDED:
            model_call_id = payload["row"].get("model_call_id")
        if not isinstance(model_call_id, str) or not model_call_id:
            return  # an imported capture line without an id: nothing to reconcile it with
        row: dict[str, Any] = {
            "rollout_id": rollout_id,
            "generation": event.generation,
            "model_call_id": model_call_id,
        }
        if event.kind in ROW_KINDS:
            row.update(row_seq=event.seq, row_kind=ROW_KINDS[event.kind])
            row["admitted_at"] = event.recorded_at
            self._upsert(conn, "row", _ROW_COLUMNS).execute(conn, row)
        elif event.kind == MODEL_CALL_INTENT_RECORDED:
            row.update(intent_seq=event.seq, admitted_at=event.recorded_at)
            self._upsert(conn, "intent", _INTENT_COLUMNS).execute(conn, row)
        else:
            row["capture_seq"] = event.seq
            self._upsert(conn, "capture", _CAPTURE_COLUMNS).execute(conn, row)


def projectors() -> list[Projector]:
    return [CallEvidenceProjector()]
