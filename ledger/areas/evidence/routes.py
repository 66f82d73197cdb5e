"""Evidence routes: record intents (for clients that write no ``<id>.tokens.intents`` file),
and one rollout's reconciliation of lineage rows, intents and captures."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ledger.app.bootstrap import Ledger
from ledger.app.http.auth import IngestAuth, ReadAuth
from ledger.app.http.body import read_json, request_body_schema, validate_as
from ledger.app.http.deps import LedgerDep, RolloutIdDep
from ledger.app.http.openapi import error_responses
from ledger.areas.evidence.service import MAX_INTENTS, EvidenceService, record_intents
from ledger.gym.capture_lines import ModelCallId
from ledger.log.errors import NotFound

router = APIRouter(prefix="/v1", tags=["call evidence"])


class Intents(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_call_ids: Annotated[list[ModelCallId], Field(min_length=1, max_length=MAX_INTENTS)]


INTENTS = TypeAdapter(Intents)


def evidence_service(ledger: Ledger) -> EvidenceService:
    return EvidenceService(ledger.store.read_sync, ledger.settings.capture_grace_s)


@router.post(
    "/rollouts/{rollout_id}/model-calls/intents",
    status_code=201,
    openapi_extra=request_body_schema(INTENTS),
    responses={200: {"description": "every id already had its intent"}},
)
async def record_call_intents(
    ledger: LedgerDep, _auth: IngestAuth, rollout_id: RolloutIdDep, request: Request
) -> JSONResponse:
    """Gym's ``<id>.tokens.intents`` lines over HTTP: calls about to be dispatched. Each id is
    recorded once per rollout generation; 201 when any was new."""
    body = await read_json(request)
    intents = validate_as(INTENTS, body.refuse_if_wrong())
    receipt = await record_intents(ledger.store, rollout_id, intents.model_call_ids)
    return JSONResponse(
        {
            "rollout_id": rollout_id,
            "recorded": receipt.recorded,
            "already_recorded": receipt.already_recorded,
            "seqs": receipt.seqs,
        },
        status_code=201 if receipt.recorded else 200,
    )


@router.get("/rollouts/{rollout_id}/call-evidence", responses=error_responses(404))
async def read_call_evidence(
    ledger: LedgerDep, _auth: ReadAuth, rollout_id: RolloutIdDep
) -> dict[str, Any]:
    """Every call of the rollout's current generation with the seq of its lineage row, intent
    and capture, what is missing (pending within the grace window), and the coverage."""
    document = await evidence_service(ledger).rollout(rollout_id)
    if document is None:
        raise NotFound(f"rollout {rollout_id!r} has no events")
    return document
