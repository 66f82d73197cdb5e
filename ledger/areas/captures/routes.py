"""Model-call capture routes: Gym's CaptureStore over HTTP, and the ng_model_call_capture view."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ledger.app.http.auth import IngestAuth, ReadAuth
from ledger.app.http.body import read_json, request_body_schema, validate_as
from ledger.app.http.deps import LedgerDep, RolloutIdDep
from ledger.app.http.openapi import error_responses
from ledger.areas.captures.service import MAX_BATCH_ITEMS, MarkerReceipt
from ledger.areas.runs.http import RunLabelQuery
from ledger.gym.capture_lines import MAX_MODEL_CALL_ID_LENGTH, CaptureExchange, ModelCallId
from ledger.gym.ids import PRINTABLE_ID_PATTERN, ROLLOUT_ID_SCHEMA
from ledger.log.errors import InvalidPayload

router = APIRouter(prefix="/v1", tags=["model-call capture"])


class PendingCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_call_id: ModelCallId


# Documentation of the batch body (the route parses it itself, item by item).
class BatchItem(BaseModel):
    rollout_id: Annotated[str, Field(json_schema_extra=ROLLOUT_ID_SCHEMA)]
    exchange: CaptureExchange


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: Annotated[list[BatchItem], Field(max_length=MAX_BATCH_ITEMS)]


PENDING_CALL = TypeAdapter(PendingCall)


def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return request_body_schema(TypeAdapter(model))


async def _exchange_body(request: Request) -> Any:
    """The body parsed once; the exchange is opaque model-server JSON, so integers beyond 64
    bits are kept exactly as sent (a usage count that large is invalid, hence absent)."""
    return await read_json(request, wide_integers=True)


def _marker(receipt: MarkerReceipt, flag: str, **extra: Any) -> JSONResponse:
    content = {"rollout_id": receipt.rollout_id, **extra, flag: receipt.changed, "seq": receipt.seq}
    return JSONResponse(content, status_code=201 if receipt.changed and flag != "cleared" else 200)


@router.post(
    "/rollouts/{rollout_id}/model-calls",
    status_code=201,
    openapi_extra=_schema_of(CaptureExchange),
    responses={
        200: {"description": "the same exchange again: the original reply"},
        **error_responses(409),
    },
)
async def append_model_call(
    ledger: LedgerDep,
    _auth: IngestAuth,
    rollout_id: RolloutIdDep,
    request: Request,
    run: RunLabelQuery = None,
) -> JSONResponse:
    """Append one raw exchange (Gym's capture line); 201 once durable, 200 for a repeat,
    409 when the model_call_id was captured with a different exchange, or when ``run``
    differs from the rollout's run label."""
    body = await _exchange_body(request)
    receipt = await ledger.captures.append(rollout_id, body.refuse_if_wrong("exchange"), run=run)
    return JSONResponse(receipt.public(), status_code=201 if receipt.created else 200)


@router.post("/model-calls/batch", openapi_extra=_schema_of(BatchRequest))
async def append_model_calls(
    ledger: LedgerDep, _auth: IngestAuth, request: Request, run: RunLabelQuery = None
) -> JSONResponse:
    """Append many exchanges for many rollouts: one result per item, in order
    (``status`` 201/200 with the receipt, or 400/409/422 with ``detail``).
    At most ``MAX_BATCH_ITEMS`` (1000) items. ``run`` labels every item's rollout; an item
    of a rollout labelled otherwise is a 409 of its own."""
    parsed = await _exchange_body(request)
    outside, refused = parsed.split_items("items")
    if outside:
        raise InvalidPayload("; ".join(problem.describe() for problem in outside[:10]))
    body = parsed.value
    if not isinstance(body, dict):
        raise InvalidPayload("body: must be a JSON object with 'items'")
    unknown = sorted(set(body) - {"items"})
    if unknown:
        raise InvalidPayload(f"body.{unknown[0]}: Extra inputs are not permitted")
    items = body.get("items")
    if not isinstance(items, list):
        raise InvalidPayload("items: must be a list")
    if len(items) > MAX_BATCH_ITEMS:
        raise InvalidPayload(f"items: at most {MAX_BATCH_ITEMS} items per batch, got {len(items)}")
    results = await ledger.captures.append_many(
        items, refused={index: problem.describe() for index, problem in refused.items()}, run=run
    )
    return JSONResponse({"results": [result.public() for result in results]})


@router.post(
    "/rollouts/{rollout_id}/model-calls/incomplete",
    status_code=201,
    responses={200: {"description": "the marker was already set"}},
)
async def mark_capture_incomplete(
    ledger: LedgerDep, _auth: IngestAuth, rollout_id: RolloutIdDep
) -> JSONResponse:
    """Gym's ``<id>.capture.incomplete`` marker (a capture write failed upstream);
    201 when set now, 200 when it was already set."""
    return _marker(await ledger.captures.mark_incomplete(rollout_id), "incomplete")


@router.delete("/rollouts/{rollout_id}/model-calls")
async def clear_model_calls(
    ledger: LedgerDep, _auth: IngestAuth, rollout_id: RolloutIdDep
) -> JSONResponse:
    """The collector's pre-dispatch clear of exactly this rollout-attempt id: reads are empty
    afterwards and call_index restarts at 0. ``cleared`` is false when there was nothing."""
    return _marker(await ledger.captures.clear(rollout_id), "cleared")


@router.post(
    "/rollouts/{rollout_id}/model-calls/pending",
    status_code=201,
    openapi_extra=_schema_of(PendingCall),
    responses={200: {"description": "the call was already announced (or already captured)"}},
)
async def announce_pending_call(
    ledger: LedgerDep, _auth: IngestAuth, rollout_id: RolloutIdDep, request: Request
) -> JSONResponse:
    """Announce an in-flight call: until its capture lands or it is withdrawn, the rollout's
    attachment carries the gap ``model_call_capture_pending``."""
    body = await read_json(request)
    call = validate_as(PENDING_CALL, body.refuse_if_wrong())
    receipt = await ledger.captures.announce_pending(rollout_id, call.model_call_id)
    return _marker(receipt, "pending", model_call_id=call.model_call_id)


@router.delete("/rollouts/{rollout_id}/model-calls/pending")
async def withdraw_pending_call(
    ledger: LedgerDep,
    _auth: IngestAuth,
    rollout_id: RolloutIdDep,
    model_call_id: Annotated[
        str,
        Query(min_length=1, max_length=MAX_MODEL_CALL_ID_LENGTH, pattern=PRINTABLE_ID_PATTERN),
    ],
) -> JSONResponse:
    """Withdraw an announcement (the call will never be captured)."""
    receipt = await ledger.captures.withdraw_pending(rollout_id, model_call_id)
    return JSONResponse(
        {
            "rollout_id": rollout_id,
            "model_call_id": model_call_id,
            "withdrawn": receipt.changed,
            "seq": receipt.seq,
        }
    )


@router.get("/rollouts/{rollout_id}/model-calls", responses=error_responses(503))
async def read_model_calls(
    ledger: LedgerDep,
    _auth: ReadAuth,
    rollout_id: RolloutIdDep,
    payloads: Annotated[bool, Query()] = True,
) -> JSONResponse:
    """``{"rollout_id", "calls": [ModelCallRecord...], "gaps": [...]}`` in call_index order."""
    return JSONResponse(await ledger.captures.model_calls(rollout_id, payloads=payloads))


@router.get("/rollouts/{rollout_id}/ng_model_call_capture", responses=error_responses(503))
async def read_ng_model_call_capture(
    ledger: LedgerDep,
    _auth: ReadAuth,
    rollout_id: RolloutIdDep,
    payloads: Annotated[bool, Query()] = False,
) -> JSONResponse:
    """Exactly Gym's attachment: ``{"rollout_id", "metrics", "calls", "gaps"?}``."""
    return JSONResponse(await ledger.captures.attachment(rollout_id, payloads=payloads))
