"""The captures area's projection of the write side: positions and per-rollout capture state.

``call_index`` is assigned here and nowhere else: the next position of the rollout's current
generation since its last clear. Every ``model_call.captured`` and ``model_call.damaged`` event
consumes one, like a non-blank line of Gym's capture file under the tolerant read. Nothing here
derives anything from the exchange: a position is its identity (``model_call_id`` and the
event's ``payload_sha256``); what the exchange says is the view's (``calls_view.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, Table, bindparam, delete, insert

from ledger.areas.captures.events import (
    CAPTURE_CLEARED,
    CAPTURE_MARKED_INCOMPLETE,
    CAPTURE_PENDING_ANNOUNCED,
    CAPTURE_PENDING_WITHDRAWN,
    MODEL_CALL_CAPTURED,
    MODEL_CALL_DAMAGED,
)
from ledger.areas.captures.queries import CaptureState, is_pending, load_state
from ledger.areas.captures.tables import capture_pending, capture_positions, capture_state
from ledger.log.driver import DriverStatement
from ledger.log.encoding import EncodedPayload, encode_body
from ledger.log.ended_generations import (
    EndedGenerations,
    delete_generations,
    delete_rollouts,
)
from ledger.log.projector import Projector
from ledger.log.records import StoredEvent
from ledger.log.rollout_events import ROLLOUT_DELETED

_HANDLED = frozenset(
    {
        MODEL_CALL_CAPTURED,
        MODEL_CALL_DAMAGED,
        CAPTURE_MARKED_INCOMPLETE,
        CAPTURE_CLEARED,
        CAPTURE_PENDING_ANNOUNCED,
        CAPTURE_PENDING_WITHDRAWN,
        ROLLOUT_DELETED,
    }
)


# Compiled once and run on the driver (log/driver.py): these run for every capture.
_INSERT_POSITION = DriverStatement(capture_positions.insert())
_INSERT_STATE = DriverStatement(capture_state.insert())
_UPDATE_STATE = DriverStatement(
    capture_state.update().where(capture_state.c.rollout_id == bindparam("b_rollout_id"))
)
_FORGET_GENERATION = tuple(
    DriverStatement(
        delete(table)
        .where(table.c.rollout_id == bindparam("b_rollout_id"))
        .where(table.c.generation == bindparam("b_generation"))
    )
    for table in (capture_positions, capture_pending)
)


def exchange_payload(model_call_id: str | None, exchange: dict[str, Any]) -> EncodedPayload:
    """The payload of a ``model_call.captured`` event; its ``sha256`` is the capture's identity
    for model_call_id idempotency (the projection copies it instead of hashing again)."""
    return encode_body({"model_call_id": model_call_id, "exchange": exchange})


class CapturesProjector:
    """Writes position and pending rows, and each touched rollout's ``capture_state`` row once
    per run of events (``apply_many``): a command appending many captures to a rollout reads
    that row once and writes it once instead of once per capture. Everything is written when
    the call returns."""

    name = "captures"
    version = 2
    follows_log = False
    tables: tuple[Table, ...] = (capture_positions, capture_state, capture_pending)

    def handles(self, kind: str) -> bool:
        return kind in _HANDLED

    def apply(self, conn: Connection, event: StoredEvent) -> None:
        self.apply_many(conn, (event,))

    def apply_many(self, conn: Connection, events: Sequence[StoredEvent]) -> None:
        run = _Run(conn)
        for event in events:
            run.apply(event)
        run.finish()

    def flush(self, conn: Connection) -> None:
        """Nothing is deferred."""

    def discard(self) -> None:
        """Nothing is deferred."""


class _Run:
    """One ``apply_many``: what it has read and not written yet, gone when it finishes.

    The position rows are inserted together (no statement of ``apply`` reads
    ``capture_positions``; a clear or a tombstone inserts the rows kept so far first), and the
    generations tombstones ended are removed together (ended_generations.py) before any other
    event is applied and when the run finishes."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        # rollout_id -> its capture_state row as of the last event applied; ``stored``: whether
        # the table holds a row for the id (INSERT or UPDATE when written).
        self._known: dict[str, CaptureState] = {}
        # The ids whose row in ``_known`` is not written yet (a dict: written in a fixed order).
        self._unwritten: dict[str, None] = {}
        self._position_rows: list[dict[str, Any]] = []
        self._ended = EndedGenerations()

    def finish(self) -> None:
        self._insert_kept_positions()
        self._remove_ended()
        for rollout_id in self._unwritten:
            state = self._known[rollout_id]
            values = {
                "generation": state.generation,
                "next_call_index": state.next_call_index,
                "has_evidence": state.has_evidence,
                "incomplete": state.incomplete,
                "pending_count": state.pending_count,
                "cleared_seq": state.cleared_seq,
                "last_seq": state.last_seq,
            }
            if state.stored:
                _UPDATE_STATE.execute(self.conn, {**values, "b_rollout_id": rollout_id})
            else:
                _INSERT_STATE.execute(self.conn, {**values, "rollout_id": rollout_id})
        self._unwritten = {}

    def _remove_ended(self) -> None:
        if self._ended:
            ended = self._ended.take()
            for table in (capture_positions, capture_pending):
                delete_generations(self.conn, table, ended)
            delete_rollouts(self.conn, capture_state, ended)

    def _insert_kept_positions(self) -> None:
        if self._position_rows:
            rows, self._position_rows = self._position_rows, []
            _INSERT_POSITION.execute_many(self.conn, rows)

    def _state(self, rollout_id: str, generation: int) -> CaptureState:
        known = self._known.get(rollout_id)
        if known is None:
            return load_state(self.conn, rollout_id, generation)
        if known.generation == generation:
            return known
        # What load_state answers for a row of another generation (the row is known here).
        return CaptureState(rollout_id=rollout_id, generation=generation, stored=known.stored)

    def apply(self, event: StoredEvent) -> None:
        conn = self.conn
        rollout_id = event.rollout_id
        if rollout_id is None:
            return
        if event.kind == ROLLOUT_DELETED:
            # The rows kept so far go in first: the removal of the ended generation (at the
            # next event or the finish) must see them.
            self._insert_kept_positions()
            self._ended.add(rollout_id, event.generation)
            self._known.pop(rollout_id, None)
            self._unwritten.pop(rollout_id, None)
            return
        # Any other event reads or writes rows a pending removal would change.
        self._remove_ended()
        state = self._state(rollout_id, event.generation)
        payload = event.payload
        if event.kind in (MODEL_CALL_CAPTURED, MODEL_CALL_DAMAGED):
            self._known[rollout_id] = self._position(state, event)
            self._unwritten[rollout_id] = None
            return
        if event.kind == CAPTURE_MARKED_INCOMPLETE:
            state = replace(state, has_evidence=True, incomplete=True)
        elif event.kind == CAPTURE_CLEARED:
            self._forget_generation(rollout_id, event.generation)
            state = CaptureState(
                rollout_id=rollout_id,
                generation=event.generation,
                cleared_seq=event.seq,
                stored=state.stored,
            )
        elif event.kind == CAPTURE_PENDING_ANNOUNCED and payload is not None:
            model_call_id = payload["model_call_id"]
            if not is_pending(conn, rollout_id, event.generation, model_call_id):
                conn.execute(
                    insert(capture_pending).values(
                        rollout_id=rollout_id,
                        generation=event.generation,
                        model_call_id=model_call_id,
                        announced_seq=event.seq,
                    )
                )
                state = replace(state, pending_count=state.pending_count + 1)
        elif event.kind == CAPTURE_PENDING_WITHDRAWN and payload is not None:
            state = self._settle_pending(state, payload["model_call_id"])
        self._known[rollout_id] = replace(state, last_seq=event.seq)
        self._unwritten[rollout_id] = None

    def _position(self, state: CaptureState, event: StoredEvent) -> CaptureState:
        """Keeps the position's row; the state after the event (``last_seq`` included)."""
        call_index = state.next_call_index
        state = replace(
            state, next_call_index=call_index + 1, has_evidence=True, last_seq=event.seq
        )
        payload = event.payload
        if payload is None:
            # Redacted by compaction: only ended generations are redacted, and their rows are
            # dropped when the tombstone is projected, so the position alone is enough here.
            return state
        model_call_id = None
        exchange_sha256 = None
        if event.kind == MODEL_CALL_CAPTURED:
            model_call_id = payload["model_call_id"]
            exchange_sha256 = event.payload_sha256
        self._position_rows.append(
            {
                "rollout_id": state.rollout_id,
                "generation": state.generation,
                "call_index": call_index,
                "seq": event.seq,
                "model_call_id": model_call_id,
                "exchange_sha256": exchange_sha256,
            }
        )
        if model_call_id is not None:
            state = self._settle_pending(state, model_call_id)
        return state

    def _settle_pending(self, state: CaptureState, model_call_id: str) -> CaptureState:
        if state.pending_count == 0:
            return state
        removed = self.conn.execute(
            delete(capture_pending)
            .where(capture_pending.c.rollout_id == state.rollout_id)
            .where(capture_pending.c.generation == state.generation)
            .where(capture_pending.c.model_call_id == model_call_id)
        ).rowcount
        if removed:
            return replace(state, pending_count=max(0, state.pending_count - removed))
        return state

    def _forget_generation(self, rollout_id: str, generation: int) -> None:
        self._insert_kept_positions()
        for statement in _FORGET_GENERATION:
            statement.execute(self.conn, {"b_rollout_id": rollout_id, "b_generation": generation})


def projectors() -> list[Projector]:
    return [CapturesProjector()]


__all__ = ["CapturesProjector", "exchange_payload", "projectors"]
