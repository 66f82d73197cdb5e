"""Routes of the lineage area: Gym's control routes (exactly per contract §3.8) and /v1 routes
for recording ledger rows, admission, parent lookup and orphaned staging keys."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, TypeAdapter

from ledger.app.http.auth import ControlAuth, IngestAuth, ReadAuth, require_control
from ledger.app.http.body import (
    read_json,
    request_body_schema,
    validate_as_fastapi,
)
from ledger.app.http.deps import MAX_SEQ, LedgerDep, RolloutIdDep
from ledger.app.http.openapi import error_responses
from ledger.areas.lineage.queries import RemovalResult
from ledger.gym.ids import PRINTABLE_ID_PATTERN
from ledger.gym.lineage import (
    CONTROL_ROUTE_PREFIX,
    LedgerBatchRequest,
    LedgerRowBody,
    manifest_json,
    removal_json,
)
from ledger.log.errors import BadRequest

router = APIRouter()

BATCH_REQUEST: TypeAdapter[LedgerBatchRequest] = TypeAdapter(LedgerBatchRequest)
ROW_BODY: TypeAdapter[Any] = TypeAdapter(LedgerRowBody)


# --- Gym's control routes -----------------------------------------------------------------


@router.get(
    f"{CONTROL_ROUTE_PREFIX}/rollouts/{{rollout_id}}/manifest",
    tags=["control"],
    responses=error_responses(410),
)
async def get_manifest(ledger: LedgerDep, _auth: ControlAuth, rollout_id: RolloutIdDep) -> Any:
    """The rollout's token-free manifest; 410 once retired (gone, not empty)."""
    manifest = await ledger.lineage.manifest(rollout_id)
    return JSONResponse(manifest_json(manifest))


def _removal_reply(result: RemovalResult) -> JSONResponse:
    return JSONResponse(removal_json(result.removed, result.absent))


@router.post(
    f"{CONTROL_ROUTE_PREFIX}/rollouts/retire",
    tags=["control"],
    openapi_extra=request_body_schema(BATCH_REQUEST),
)
async def retire_rollouts(request: Request, ledger: LedgerDep) -> JSONResponse:
    """Fence every id; ``removed`` lists those that had ledger rows."""
    # Authorised here, after the body is validated: Gym answers a malformed body with 422
    # even without a token.
    body = validate_as_fastapi(BATCH_REQUEST, await read_json(request))
    await require_control(request)
    return _removal_reply(await ledger.lineage.retire(body.rollout_ids))


@router.post(
    f"{CONTROL_ROUTE_PREFIX}/rollouts/delete",
    tags=["control"],
    openapi_extra=request_body_schema(BATCH_REQUEST),
)
async def delete_rollouts(request: Request, ledger: LedgerDep) -> JSONResponse:
    """End each id's generation (rows and fence); ``removed`` lists those that had rows."""
    body = validate_as_fastapi(BATCH_REQUEST, await read_json(request))
    await require_control(request)
    return _removal_reply(await ledger.lineage.delete(body.rollout_ids))


# --- the ledger's own routes --------------------------------------------------------------


class RecordReply(BaseModel):
    outcome: Literal["recorded", "duplicate", "discarded"]
    seq: int | None
    """The event that recorded the row (the original one for a duplicate, the discard event for
    a discarded row)."""


@router.post(
    "/v1/rollouts/{rollout_id}/ledger/rows",
    tags=["lineage"],
    openapi_extra=request_body_schema(ROW_BODY),
    responses=error_responses(409),
)
async def record_row(
    ledger: LedgerDep, _auth: IngestAuth, rollout_id: RolloutIdDep, request: Request
) -> RecordReply:
    """Record one committed-call row or failure row; late rows of a retired rollout are
    discarded (their staging keys appear under /v1/orphaned-staging-keys)."""
    # FastAPI's 422 shape, as the route answered before it parsed its own body.
    row = validate_as_fastapi(ROW_BODY, await read_json(request))
    result = await ledger.lineage.record(rollout_id, row)
    return RecordReply(outcome=result.outcome, seq=result.seq)


class Admission(BaseModel):
    admitted: Literal[True]
    generation: int


@router.get("/v1/rollouts/{rollout_id}/admission", tags=["lineage"], responses=error_responses(410))
async def admission(ledger: LedgerDep, _auth: ReadAuth, rollout_id: RolloutIdDep) -> Admission:
    """Whether a new call may be captured for the rollout: 410 once it is retired."""
    return Admission(admitted=True, generation=await ledger.lineage.admission(rollout_id))


class HasRows(BaseModel):
    has_rows: bool
    generation: int


@router.get("/v1/rollouts/{rollout_id}/ledger/has-rows", tags=["lineage"])
async def has_rows(ledger: LedgerDep, _auth: ReadAuth, rollout_id: RolloutIdDep) -> HasRows:
    """Whether the current generation has any row, committed or failure (Gym's
    ``CaptureLedger.has_rows``); 410 once the rollout is retired."""
    generation, found = await ledger.lineage.has_rows(rollout_id)
    return HasRows(has_rows=found, generation=generation)


class LedgerRowPublic(BaseModel):
    seq: int
    row: dict[str, Any]


class LedgerRowsPage(BaseModel):
    rollout_id: str
    generation: int
    rows: list[LedgerRowPublic]


@router.get(
    "/v1/rollouts/{rollout_id}/ledger/rows", tags=["lineage"], responses=error_responses(410)
)
async def find_rows(
    ledger: LedgerDep,
    _auth: ReadAuth,
    rollout_id: RolloutIdDep,
    fingerprint: Annotated[str | None, Query(max_length=1024)] = None,
    model_call_id: Annotated[
        str | None, Query(min_length=1, max_length=1024, pattern=PRINTABLE_ID_PATTERN)
    ] = None,
) -> LedgerRowsPage:
    """Committed rows of the current generation by ``fingerprint`` and/or ``model_call_id``
    (failure rows never resolve as parents)."""
    if fingerprint is None and model_call_id is None:
        raise BadRequest("give fingerprint and/or model_call_id")
    generation, rows = await ledger.lineage.find_rows(
        rollout_id, fingerprint=fingerprint, model_call_id=model_call_id
    )
    return LedgerRowsPage(
        rollout_id=rollout_id,
        generation=generation,
        rows=[LedgerRowPublic(seq=seq, row=row) for seq, row in rows],
    )


class OrphanedStagingKeyPublic(BaseModel):
    seq: int
    rollout_id: str
    generation: int
    model_call_id: str
    staging_key: str
    discarded_at: datetime


class OrphanedStagingKeysPage(BaseModel):
    keys: list[OrphanedStagingKeyPublic]
    next_after: int
    """Pass as ``after`` to read the next page (unchanged when the page was empty)."""


@router.get("/v1/orphaned-staging-keys", tags=["lineage"])
async def orphaned_staging_keys(
    ledger: LedgerDep,
    _auth: ReadAuth,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1)] = 100,
) -> OrphanedStagingKeysPage:
    """Staging keys of rows discarded by a fence, in seq order: staged tokens no manifest
    references, for the framework to sweep."""
    found = await ledger.lineage.orphaned_staging_keys(after=after, limit=limit)
    return OrphanedStagingKeysPage(
        keys=[OrphanedStagingKeyPublic(**key.__dict__) for key in found],
        next_after=found[-1].seq if found else after,
    )
