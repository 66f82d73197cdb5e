"""Observation routes: agent observations, collector results, trajectory, record, export."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, TypeAdapter

from ledger.app.http.auth import IngestAuth, ReadAuth
from ledger.app.http.body import read_json, request_body_schema
from ledger.app.http.deps import MAX_SEQ, LedgerDep, ProjectedViewsDep, RolloutIdDep
from ledger.app.http.openapi import error_responses
from ledger.areas.observations.queries import ExportFilter
from ledger.areas.observations.service import MAX_IDEMPOTENCY_KEY, RecordedReceipt
from ledger.areas.runs.http import RunLabelQuery
from ledger.gym.ids import PRINTABLE_ID_PATTERN, TASK_ID_PATTERN
from ledger.gym.observations import AgentObservationBundle
from ledger.gym.result import RolloutResult

router = APIRouter(prefix="/v1", tags=["observations"])

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Repeat a write safely: the same key and body answer 200 with the original.",
        # Documented only: the service refuses a key outside 1..200 characters with 422.
        json_schema_extra={
            "minLength": 1,
            "maxLength": MAX_IDEMPOTENCY_KEY,
            "pattern": PRINTABLE_ID_PATTERN,
        },
    ),
]
View = Literal["stored", "export"]


def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return request_body_schema(TypeAdapter(model))


async def _json_body(request: Request) -> Any:
    """The body parsed once; the service validates it once, so errors name the contract rule."""
    return (await read_json(request)).refuse_if_wrong()


def _receipt(receipt: RecordedReceipt) -> JSONResponse:
    return JSONResponse(receipt.public(), status_code=201 if receipt.created else 200)


@router.post(
    "/rollouts/{rollout_id}/observations",
    status_code=201,
    openapi_extra=_schema_of(AgentObservationBundle),
    responses={
        200: {"description": "an idempotent repeat: the original receipt"},
        **error_responses(409),
    },
)
async def record_observations(
    ledger: LedgerDep,
    _auth: IngestAuth,
    rollout_id: RolloutIdDep,
    request: Request,
    idempotency_key: IdempotencyKey = None,
    run: RunLabelQuery = None,
) -> JSONResponse:
    """Record the agent's ``AgentObservationBundle`` (it supersedes an earlier one of the same
    rollout generation). 422 names the broken rule in the contract's words; 409 when ``run``
    differs from the rollout's run label."""
    receipt = await ledger.observations.record_observations(
        rollout_id, await _json_body(request), idempotency_key=idempotency_key, run=run
    )
    return _receipt(receipt)


@router.post(
    "/rollouts/{rollout_id}/result",
    status_code=201,
    openapi_extra=_schema_of(RolloutResult),
    responses={
        200: {"description": "an idempotent repeat: the original receipt"},
        **error_responses(409),
    },
)
async def record_result(
    ledger: LedgerDep,
    _auth: IngestAuth,
    rollout_id: RolloutIdDep,
    request: Request,
    idempotency_key: IdempotencyKey = None,
    run: RunLabelQuery = None,
) -> JSONResponse:
    """Record what the collector knows about the finished attempt: task identity, ``resolved``,
    ``latency_ms`` (dispatcher-measured), an optional producer ``ng_trajectory``, producer gaps.
    ``run`` labels the rollout (409 when it holds another label)."""
    receipt = await ledger.observations.record_result(
        rollout_id, await _json_body(request), idempotency_key=idempotency_key, run=run
    )
    return _receipt(receipt)


@router.get("/rollouts/{rollout_id}/trajectory", responses=error_responses(404, 503))
async def get_trajectory(
    ledger: LedgerDep, _auth: ReadAuth, rollout_id: RolloutIdDep
) -> dict[str, Any]:
    """The rollout's ``ng_trajectory`` (404 when the projection failed: see ``/record``)."""
    return await ledger.observations.trajectory(rollout_id)


@router.get("/rollouts/{rollout_id}/record", responses=error_responses(404, 503))
async def get_record(
    ledger: LedgerDep,
    _auth: ReadAuth,
    rollout_id: RolloutIdDep,
    view: Annotated[View, Query(description="'export': Gym's export view")] = "stored",
) -> Response:
    """The enriched record as Gym's collector attaches it: identity, ``ng_model_call_capture``,
    ``ng_agent_observations`` (joined), ``ng_trajectory``, ``ng_perf``."""
    if view == "export":
        return JSONResponse(await ledger.observations.record(rollout_id, view="export"))
    # The stored bytes as they are: one lookup, no re-serialisation.
    text = await ledger.observations.record_text(rollout_id)
    return Response(content=text, media_type="application/json")


@router.get("/export", response_class=StreamingResponse, responses=error_responses(409, 503))
async def export_records(
    ledger: LedgerDep,
    _auth: ReadAuth,
    after_seq: Annotated[
        int, Query(ge=0, le=MAX_SEQ, description="records last changed after this seq")
    ] = 0,
    until_seq: Annotated[
        int | None, Query(ge=0, le=MAX_SEQ, description="... and at or before this")
    ] = None,
    state: Annotated[Literal["live", "retired"] | None, Query()] = None,
    task_id: Annotated[str | None, Query(max_length=1000, pattern=TASK_ID_PATTERN)] = None,
    view: Annotated[View, Query()] = "stored",
    *,
    _views: ProjectedViewsDep,
) -> StreamingResponse:
    """Enriched records as JSONL (``application/x-ndjson``), in the order they last changed."""
    selection = ExportFilter(after_seq=after_seq, until_seq=until_seq, state=state, task_id=task_id)
    return StreamingResponse(
        ledger.observations.export_lines(selection, view=view),
        media_type="application/x-ndjson",
    )
