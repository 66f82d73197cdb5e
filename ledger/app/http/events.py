"""The event log, paged by seq."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from ledger.app.http.auth import ReadAuth
from ledger.app.http.deps import MAX_SEQ, LedgerDep
from ledger.gym.ids import ROLLOUT_ID_SCHEMA, validate_rollout_id
from ledger.log.records import StoredEvent

router = APIRouter(prefix="/v1", tags=["events"])


class EventPublic(BaseModel):
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

    @classmethod
    def of(cls, event: StoredEvent) -> EventPublic:
        return cls(**event.__dict__)


class EventsPage(BaseModel):
    events: list[EventPublic]
    next_after: int
    """Pass as ``after`` to read the next page (unchanged when the page was empty)."""


@router.get("/events")
async def list_events(
    ledger: LedgerDep,
    _auth: ReadAuth,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1)] = 100,
    rollout_id: Annotated[str | None, Query(json_schema_extra=ROLLOUT_ID_SCHEMA)] = None,
) -> EventsPage:
    if rollout_id is not None:
        validate_rollout_id(rollout_id)
    found = await ledger.core.events(after=after, limit=limit, rollout_id=rollout_id)
    return EventsPage(
        events=[EventPublic.of(e) for e in found],
        next_after=found[-1].seq if found else after,
    )
