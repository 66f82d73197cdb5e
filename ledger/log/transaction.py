"""The write transaction a command runs in: append events, read current state, all atomically."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, Row, bindparam, select

from ledger.log.canonical import NotStorable, parse_json, storable_utf8
from ledger.log.chain import GENESIS_HASH, canonical_header, chain_hash
from ledger.log.driver import DriverStatement
from ledger.log.encoding import EncodedPayload, encode_body, holds_same_payload
from ledger.log.errors import IdempotencyConflict, InvalidPayload
from ledger.log.events import Catalogue
from ledger.log.projector import Projector, apply_events
from ledger.log.records import Appended, NewEvent, RolloutState, StoredEvent, as_utc
from ledger.log.rollout_cache import RolloutCache
from ledger.log.rollouts_projection import RolloutsProjector, rollout_after
from ledger.log.tables import events, rollouts


@dataclass(frozen=True)
class ChainHead:
    seq: int
    hash: str


GENESIS = ChainHead(seq=0, hash=GENESIS_HASH)


# Statements of the hot path are built once: building a Core statement per call (``.values()``,
# ``where(col == value)``) costs more than executing it, because its cache key is recomputed
# every time. Executed with a parameter dict, one compiled form is reused.
_INSERT_EVENT = DriverStatement(events.insert())
_SELECT_ROLLOUT = select(rollouts).where(rollouts.c.rollout_id == bindparam("b_rollout_id"))
_SELECT_BY_IDEMPOTENCY_KEY = select(events).where(
    events.c.idempotency_key == bindparam("b_idempotency_key")
)


# Ids per ``IN (...)`` list: well inside every backend's parameter limit.
_IN_CHUNK = 500


def read_head(conn: Connection) -> ChainHead:
    row = conn.execute(
        select(events.c.seq, events.c.hash).order_by(events.c.seq.desc()).limit(1)
    ).first()
    return GENESIS if row is None else ChainHead(seq=row.seq, hash=row.hash)


def row_to_event(row: Row[Any], catalogue: Catalogue) -> StoredEvent:
    """Decode a stored row, upcasting its payload to the kind's current version."""
    payload: dict[str, Any] | None = None
    if row.payload is not None:
        payload = catalogue.upcast(row.kind, row.schema_version, parse_json(row.payload))
    return StoredEvent(
        seq=row.seq,
        recorded_at=as_utc(row.recorded_at),
        kind=row.kind,
        # The payload handed out is at the current version, so the version must say so too.
        schema_version=catalogue.get(row.kind).version,
        rollout_id=row.rollout_id,
        generation=row.generation,
        idempotency_key=row.idempotency_key,
        payload=payload,
        payload_sha256=row.payload_sha256,
        hash=row.hash,
    )


def encode_payload(
    catalogue: Catalogue, kind: str, payload: BaseModel | dict[str, Any]
) -> EncodedPayload:
    """Validate a new payload and encode it as stored (canonical text and digest): needs no
    ledger state, so callers do it before the writer (``LedgerStore.append``) and hand the
    result to ``append``."""
    _, body = catalogue.encode(kind, payload)
    try:
        return encode_body(body)
    except NotStorable as exc:
        raise InvalidPayload(f"{kind} event cannot be stored: {exc}") from None


def _now() -> datetime:
    return datetime.now(UTC)


class WriteTransaction:
    """Handed to each command by the writer; valid only inside that command."""

    def __init__(
        self,
        conn: Connection,
        head: ChainHead,
        catalogue: Catalogue,
        projectors: Sequence[Projector],
        rollouts: RolloutCache | None = None,
    ) -> None:
        self._conn = conn
        self.head = head
        self._catalogue = catalogue
        self._projectors = projectors
        # Rows of `rollouts` read or written by this writer (see rollout_cache.py). They can be
        # kept up to date only when the rollouts projection runs here, as it does in a ledger.
        self._rollouts = rollouts if rollouts is not None else RolloutCache()
        self._projects_rollouts = any(isinstance(p, RolloutsProjector) for p in projectors)
        # Event rows are kept here, in seq order, and written by one multi-row INSERT
        # (``write_events``): when the writer's batch ends, or earlier when a command is about
        # to read the events table by SQL or looks up an idempotency key one of them holds. No
        # projector reads the events table while applying, and no table has a foreign key to it.
        self._unwritten_events: list[dict[str, Any]] = []
        self._unwritten_keys: set[str] = set()
        # Rows written during the current command (inside its savepoint): a rollback of the
        # command undoes them, so those of earlier commands are kept again.
        self._written_in_command: list[dict[str, Any]] = []

    @property
    def conn(self) -> Connection:
        """The write connection, for a command's own SQL. Reading it has no effect.

        Every projection row of what the command appended is written when ``append`` (or
        ``append_many``) returns, so SQL on it sees them. Only the event rows of a writer batch
        wait, for the batch's one INSERT: a command that reads the events table by SQL calls
        ``write_events()`` first.
        """
        return self._conn

    def write_events(self) -> None:
        """Write the event rows kept in memory, all in one statement: the writer calls it
        before the commit, and a command calls it before it reads the events table by SQL."""
        if self._unwritten_events:
            rows, self._unwritten_events = self._unwritten_events, []
            self._unwritten_keys = set()
            _INSERT_EVENT.execute_many(self._conn, rows)
            self._written_in_command.extend(rows)

    @property
    def catalogue(self) -> Catalogue:
        return self._catalogue

    def rollback_to(self, head: ChainHead) -> None:
        """Forget what a rolled-back command did: its chain head, its event rows not written
        yet (the savepoint undid those written) and any state it read."""
        self.head = head
        if self._written_in_command or (
            self._unwritten_events and self._unwritten_events[-1]["seq"] > head.seq
        ):
            kept = [*self._written_in_command, *self._unwritten_events]
            self._unwritten_events = [row for row in kept if row["seq"] <= head.seq]
            self._unwritten_keys = {
                row["idempotency_key"]
                for row in self._unwritten_events
                if row["idempotency_key"] is not None
            }
        self._written_in_command = []
        self._rollouts.clear()

    def end_command(self) -> None:
        """The command's savepoint is kept: the rows it wrote stay written."""
        self._written_in_command = []

    def rollout(self, rollout_id: str) -> RolloutState | None:
        known, cached = self._rollouts.lookup(rollout_id)
        if known:
            return cached
        row = self._conn.execute(_SELECT_ROLLOUT, {"b_rollout_id": rollout_id}).first()
        state = None if row is None else RolloutState.from_row(row)
        self._rollouts.remember(rollout_id, state)
        return state

    def rollouts_of(self, rollout_ids: Sequence[str]) -> dict[str, RolloutState | None]:
        """``rollout()`` of many ids: the rows not in the writer's cache are read with a few
        ``IN`` lists instead of one SELECT each, and kept in the cache like ``rollout()``
        keeps them (a command over thousands of ids then appends without reading again)."""
        found: dict[str, RolloutState | None] = {}
        missing: list[str] = []
        for rollout_id in dict.fromkeys(rollout_ids):
            known, cached = self._rollouts.lookup(rollout_id)
            if known:
                found[rollout_id] = cached
            else:
                missing.append(rollout_id)
        for start in range(0, len(missing), _IN_CHUNK):
            chunk = missing[start : start + _IN_CHUNK]
            rows = self._conn.execute(select(rollouts).where(rollouts.c.rollout_id.in_(chunk)))
            read = {row.rollout_id: RolloutState.from_row(row) for row in rows}
            for rollout_id in chunk:
                state = read.get(rollout_id)
                self._rollouts.remember(rollout_id, state)
                found[rollout_id] = state
        return found

    def generation_of(self, rollout_id: str) -> int:
        state = self.rollout(rollout_id)
        return 0 if state is None else state.generation

    def find_by_idempotency_key(self, key: str) -> StoredEvent | None:
        if key in self._unwritten_keys:
            # Read back as stored, exactly as if it had been written at once.
            self.write_events()
        row = self._conn.execute(_SELECT_BY_IDEMPOTENCY_KEY, {"b_idempotency_key": key}).first()
        return None if row is None else row_to_event(row, self._catalogue)

    def append(
        self,
        kind: str,
        payload: BaseModel | dict[str, Any] | EncodedPayload,
        *,
        rollout_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Appended:
        """Append one event. ``payload`` may come already encoded (``encode_body``, outside the
        writer): its body must then be what ``catalogue.encode`` returns for ``kind`` at the
        kind's current version, which the caller vouches for (it is not validated again)."""
        return self.append_many([NewEvent(kind, payload, rollout_id, idempotency_key)])[0]

    def append_many(self, new_events: Sequence[NewEvent]) -> list[Appended]:
        """Append events in order (each as ``append`` would), then hand each projector the new
        ones it handles together (``AppliesMany``): a command appending many events to a few
        rollouts writes each rollout's rows once. When it returns, every row is written."""
        # The rollouts this call appended to, as they are after its events: their rows are
        # written by the projection at the end, so a later event of the call reads them here.
        after: dict[str, RolloutState] = {}
        results: list[Appended] = []
        try:
            for new in new_events:
                results.append(self._record(new, after))
        finally:
            # An event refused part way (its idempotency key, its payload) fails only itself:
            # the events before it are appended and projected, as by one ``append`` each.
            apply_events(self._conn, self._projectors, [r.event for r in results if r.created])
        return results

    def _record(self, new: NewEvent, after: dict[str, RolloutState]) -> Appended:
        """Append ``new`` to the chain and the event rows (not yet to the projections)."""
        kind, rollout_id, idempotency_key = new.kind, new.rollout_id, new.idempotency_key
        version = self._catalogue.get(kind).version
        if isinstance(new.payload, EncodedPayload):
            encoded = new.payload
        else:
            encoded = encode_payload(self._catalogue, kind, new.payload)
        if idempotency_key is not None:
            try:
                storable_utf8(idempotency_key)
            except ValueError as exc:
                raise InvalidPayload(f"{kind} event cannot be stored: {exc}") from None
        payload_sha256 = encoded.sha256
        if idempotency_key is not None:
            existing = self.find_by_idempotency_key(idempotency_key)
            if existing is not None:
                if (
                    existing.kind == kind
                    and existing.rollout_id == rollout_id
                    and holds_same_payload(existing.payload_sha256, encoded)
                ):
                    return Appended(event=existing, created=False)
                raise IdempotencyConflict(
                    f"idempotency key {idempotency_key!r} was already used for a different event "
                    f"(seq {existing.seq})"
                )
        before: RolloutState | None = None
        if rollout_id is not None:
            before = after[rollout_id] if rollout_id in after else self.rollout(rollout_id)
        generation = before.generation if before is not None else 0
        seq = self.head.seq + 1
        recorded_at = _now()
        header = canonical_header(
            seq=seq,
            recorded_at=recorded_at,
            kind=kind,
            schema_version=version,
            rollout_id=rollout_id,
            generation=generation,
            idempotency_key=idempotency_key,
        )
        event_hash = chain_hash(self.head.hash, header, payload_sha256)
        row = {
            "seq": seq,
            "recorded_at": recorded_at,
            "kind": kind,
            "schema_version": version,
            "rollout_id": rollout_id,
            "generation": generation,
            "idempotency_key": idempotency_key,
            "payload": encoded.text,
            "payload_sha256": payload_sha256,
            "hash": event_hash,
        }
        self._unwritten_events.append(row)
        if idempotency_key is not None:
            self._unwritten_keys.add(idempotency_key)
        self.head = ChainHead(seq=seq, hash=event_hash)
        stored = StoredEvent(
            seq=seq,
            recorded_at=recorded_at,
            kind=kind,
            schema_version=version,
            rollout_id=rollout_id,
            generation=generation,
            idempotency_key=idempotency_key,
            payload=encoded.body,
            payload_sha256=payload_sha256,
            hash=event_hash,
        )
        if rollout_id is not None:
            state = after[rollout_id] = rollout_after(before, stored)
            if self._projects_rollouts:
                self._rollouts.remember(rollout_id, state)
            else:
                self._rollouts.forget(rollout_id)
        return Appended(event=stored, created=True)
