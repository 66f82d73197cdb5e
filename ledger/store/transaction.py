"""The write transaction a command runs in: append events, read current state, all atomically."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, Row, bindparam, select

from ledger.canonical import canonical_json, sha256_hex
from ledger.errors import IdempotencyConflict
from ledger.events.base import Catalogue
from ledger.store.chain import GENESIS_HASH, canonical_header, chain_hash
from ledger.store.projections.base import Projector
from ledger.store.records import Appended, RolloutState, StoredEvent, as_utc
from ledger.store.schema import events, rollouts


@dataclass(frozen=True)
class ChainHead:
    seq: int
    hash: str


GENESIS = ChainHead(seq=0, hash=GENESIS_HASH)

# Built once (they run for every appended event).
_INSERT_EVENT = events.insert()
_GENERATION_OF = select(rollouts.c.generation).where(
    rollouts.c.rollout_id == bindparam("rollout_id")
)


def read_head(conn: Connection) -> ChainHead:
    row = conn.execute(
        select(events.c.seq, events.c.hash).order_by(events.c.seq.desc()).limit(1)
    ).first()
    return GENESIS if row is None else ChainHead(seq=row.seq, hash=row.hash)


def row_to_event(row: Row[Any], catalogue: Catalogue) -> StoredEvent:
    """Decode a stored row, upcasting its payload to the kind's current version."""
    payload: dict[str, Any] | None = None
    if row.payload is not None:
        payload = catalogue.upcast(row.kind, row.schema_version, json.loads(row.payload))
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
    ) -> None:
        self.conn = conn
        self.head = head
        self._catalogue = catalogue
        self._projectors = projectors

    @property
    def catalogue(self) -> Catalogue:
        return self._catalogue

    def rollout(self, rollout_id: str) -> RolloutState | None:
        row = self.conn.execute(select(rollouts).where(rollouts.c.rollout_id == rollout_id)).first()
        if row is None:
            return None
        return RolloutState(
            rollout_id=row.rollout_id,
            generation=row.generation,
            state=row.state,
            first_seq=row.first_seq,
            last_seq=row.last_seq,
            created_at=as_utc(row.created_at),
            updated_at=as_utc(row.updated_at),
        )

    def generation_of(self, rollout_id: str) -> int:
        row = self.conn.execute(_GENERATION_OF, {"rollout_id": rollout_id}).first()
        return 0 if row is None else int(row.generation)

    def find_by_idempotency_key(self, key: str) -> StoredEvent | None:
        row = self.conn.execute(select(events).where(events.c.idempotency_key == key)).first()
        return None if row is None else row_to_event(row, self._catalogue)

    def append(
        self,
        kind: str,
        payload: BaseModel | dict[str, Any],
        *,
        rollout_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Appended:
        version, body = self._catalogue.encode(kind, payload)
        payload_text = canonical_json(body)
        payload_sha256 = sha256_hex(payload_text.encode())
        if idempotency_key is not None:
            existing = self.find_by_idempotency_key(idempotency_key)
            if existing is not None:
                if (
                    existing.kind == kind
                    and existing.rollout_id == rollout_id
                    and existing.payload_sha256 == payload_sha256
                ):
                    return Appended(event=existing, created=False)
                raise IdempotencyConflict(
                    f"idempotency key {idempotency_key!r} was already used for a different event "
                    f"(seq {existing.seq})"
                )
        generation = self.generation_of(rollout_id) if rollout_id is not None else 0
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
        # A prebuilt statement with separate parameters: building ``.values(...)`` per event
        # cost more than the INSERT itself.
        self.conn.execute(
            _INSERT_EVENT,
            {
                "seq": seq,
                "recorded_at": recorded_at,
                "kind": kind,
                "schema_version": version,
                "rollout_id": rollout_id,
                "generation": generation,
                "idempotency_key": idempotency_key,
                "payload": payload_text,
                "payload_sha256": payload_sha256,
                "hash": event_hash,
            },
        )
        self.head = ChainHead(seq=seq, hash=event_hash)
        stored = StoredEvent(
            seq=seq,
            recorded_at=recorded_at,
            kind=kind,
            schema_version=version,
            rollout_id=rollout_id,
            generation=generation,
            idempotency_key=idempotency_key,
            payload=body,
            payload_sha256=payload_sha256,
            hash=event_hash,
        )
        for projector in self._projectors:
            if projector.handles(kind):
                projector.apply(self.conn, stored)
        return Appended(event=stored, created=True)
