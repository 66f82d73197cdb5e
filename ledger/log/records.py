"""Plain data the store hands out and takes in."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from ledger.log.encoding import EncodedPayload


@dataclass(frozen=True)
class NewEvent:
    """An event to append (``WriteTransaction.append_many``). ``payload`` may come already
    encoded (``encode_body``), as in ``WriteTransaction.append``."""

    kind: str
    payload: BaseModel | dict[str, Any] | EncodedPayload
    rollout_id: str | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    recorded_at: datetime
    kind: str
    schema_version: int
    rollout_id: str | None
    generation: int
    idempotency_key: str | None
    payload: dict[str, Any] | None
    payload_sha256: str
    hash: str
    # What the kind's area derives from the payload (``EventType.derive``), set when a page of
    # the log is decoded for the views, so the projectors that share it compute it once; None
    # for an event the writer appends. Not part of the event.
    derived: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Appended:
    """The result of one append: the event, and whether it is new or an idempotent repeat."""

    event: StoredEvent
    created: bool


@dataclass(frozen=True)
class RolloutState:
    rollout_id: str
    generation: int
    state: str
    first_seq: int
    last_seq: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Any) -> RolloutState:
        """From a row of the ``rollouts`` table."""
        return cls(
            rollout_id=row.rollout_id,
            generation=row.generation,
            state=row.state,
            first_seq=row.first_seq,
            last_seq=row.last_seq,
            created_at=as_utc(row.created_at),
            updated_at=as_utc(row.updated_at),
        )


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything we store is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
