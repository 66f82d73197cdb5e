"""Rollout state."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel

from ledger.app.http.auth import ReadAuth
from ledger.app.http.deps import LedgerDep, RolloutIdDep
from ledger.app.http.openapi import error_responses

router = APIRouter(prefix="/v1", tags=["rollouts"])


class RolloutPublic(BaseModel):
    rollout_id: str
    generation: int
    state: str
    first_seq: int
    last_seq: int
    created_at: datetime
    updated_at: datetime


@router.get("/rollouts/{rollout_id}", responses=error_responses(404))
async def get_rollout(
    ledger: LedgerDep, _auth: ReadAuth, rollout_id: RolloutIdDep
) -> RolloutPublic:
    state = await ledger.core.rollout(rollout_id)
    return RolloutPublic(**state.__dict__)
