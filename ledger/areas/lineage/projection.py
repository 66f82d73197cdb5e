"""Projections of the lineage area: ledger rows, discarded rows and the removal hold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, delete

from ledger.areas.lineage.events import (
    FAILURE_RECORDED,
    REMOVAL_HOLD_RELEASED,
    REMOVAL_HOLD_SET,
    ROW_DISCARDED,
    ROW_RECORDED,
)
from ledger.areas.lineage.tables import lineage_discarded, lineage_removal_hold, lineage_rows
from ledger.gym.lineage import staging_key_of
from ledger.log.canonical import sha256_hex, standard_json
from ledger.log.driver import DriverStatement
from ledger.log.ended_generations import EndedGenerations, delete_generations
from ledger.log.projector import Projector
from ledger.log.records import StoredEvent
from ledger.log.rollout_events import ROLLOUT_DELETED

HOLD_ID = 1

# On the driver (log/driver.py): a row is inserted for every model call (and ``ledger
# verify`` replays them all).
_INSERT_ROW = DriverStatement(lineage_rows.insert())
_INSERT_DISCARDED = DriverStatement(lineage_discarded.insert())
_RELEASE_HOLD = delete(lineage_removal_hold)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def row_columns(row: dict[str, Any]) -> dict[str, Any]:
    """The indexed columns of a stored row (defensive: imported rows may be loosely typed)."""
    text = standard_json(row)
    if "failure_reason" in row:
        kind = "failure"
    elif staging_key_of(row) is not None:
        kind = "call"
    else:
        kind = "lineage"
    return {
        "row_kind": kind,
        "model_call_id": str(row["model_call_id"]),
        "failure_reason": _text(row.get("failure_reason")),
        "staging_key": staging_key_of(row),
        "fingerprint": _text(row.get("fingerprint")),
        "fingerprint_version": _int(row.get("fingerprint_version")),
        "parent_call_id": _text(row.get("parent_call_id")),
        "cum_len": _int(row.get("cum_len")),
        "chain_hash": _text(row.get("chain_hash")),
        "response_id": _text(row.get("response_id")),
        "row": text,
        "row_sha256": sha256_hex(text.encode()),
    }


class LineageProjector:
    name = "lineage"
    version = 1
    follows_log = False
    tables: tuple[Table, ...] = (
        lineage_rows,
        lineage_discarded,
        lineage_removal_hold,
    )
    _KINDS = frozenset(
        {
            ROW_RECORDED,
            FAILURE_RECORDED,
            ROW_DISCARDED,
            REMOVAL_HOLD_SET,
            REMOVAL_HOLD_RELEASED,
            ROLLOUT_DELETED,
        }
    )

    def __init__(self) -> None:
        # Inside ``apply_many``: the rows not inserted yet (one executemany at the end).
        self._rows: list[dict[str, Any]] = []
        # Generations ended by tombstones of this run, removed together (ended_generations.py).
        self._ended = EndedGenerations()

    def handles(self, kind: str) -> bool:
        return kind in self._KINDS

    def apply(self, conn: Connection, event: StoredEvent) -> None:
        self.apply_many(conn, (event,))

    def apply_many(self, conn: Connection, events: Sequence[StoredEvent]) -> None:
        """Each event in turn, the ledger rows inserted together and the ended generations
        removed together: no statement of a run reads ``lineage_rows`` before the run ends,
        and a tombstone's delete inserts the rows kept so far first. Everything is written
        when it returns."""
        try:
            for event in events:
                self._apply(conn, event)
            self._insert_kept_rows(conn)
            self._remove_ended(conn)
        finally:
            self._rows = []
            self._ended.clear()

    def _insert_kept_rows(self, conn: Connection) -> None:
        if self._rows:
            rows, self._rows = self._rows, []
            _INSERT_ROW.execute_many(conn, rows)

    def _remove_ended(self, conn: Connection) -> None:
        if self._ended:
            delete_generations(conn, lineage_rows, self._ended.take())

    def flush(self, conn: Connection) -> None:
        """Nothing is deferred."""

    def discard(self) -> None:
        """Nothing is deferred."""

    def _apply(self, conn: Connection, event: StoredEvent) -> None:
        payload = event.payload
        if event.kind == ROLLOUT_DELETED and event.rollout_id is not None:
            # The tombstone ends the generation: its rows are gone for every reader, and a
            # rebuild after compaction (payloads redacted) agrees with the live tables.
            self._insert_kept_rows(conn)
            self._ended.add(event.rollout_id, event.generation)
            return
        self._remove_ended(conn)
        if event.kind == REMOVAL_HOLD_RELEASED:
            conn.execute(_RELEASE_HOLD)
            return
        if payload is None:
            return  # redacted: only events of ended generations, whose rows are gone anyway
        if event.kind == ROW_RECORDED and event.rollout_id is not None:
            self._insert_row(conn, event, payload["row"])
        elif event.kind == FAILURE_RECORDED and event.rollout_id is not None:
            self._insert_row(conn, event, payload)
        elif event.kind == ROW_DISCARDED:
            _INSERT_DISCARDED.execute(
                conn,
                {
                    "seq": event.seq,
                    "rollout_id": payload["rollout_id"],
                    "generation": payload["generation"],
                    "model_call_id": payload["model_call_id"],
                    "staging_key": payload["staging_key"],
                    "discarded_at": event.recorded_at,
                    "row": standard_json(payload["row"]),
                },
            )
        elif event.kind == REMOVAL_HOLD_SET:
            conn.execute(delete(lineage_removal_hold))
            conn.execute(
                lineage_removal_hold.insert().values(
                    hold_id=HOLD_ID,
                    reason=payload["reason"],
                    set_seq=event.seq,
                    set_at=event.recorded_at,
                )
            )

    def _insert_row(self, conn: Connection, event: StoredEvent, row: dict[str, Any]) -> None:
        assert event.rollout_id is not None
        values = {
            "rollout_id": event.rollout_id,
            "generation": event.generation,
            "seq": event.seq,
            **row_columns(row),
        }
        self._rows.append(values)


def projectors() -> list[Projector]:
    return [LineageProjector()]
