"""ModelCallRecord: one captured model call, derived from a raw exchange (Gym contract §2.7).

Also the per-rollout aggregation of §2.10. Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ledger.gym.extraction import ToolCall, extract_tool_calls_and_reasoning
from ledger.gym.usage import extract_token_stats

__all__ = [
    "AGGREGATE_FIELDS",
    "PAYLOAD_FIELDS",
    "ModelCallRecord",
    "ModelServerRef",
    "ToolCall",
    "aggregate_model_call_records",
    "aggregate_model_call_values",
    "build_model_call_record",
    "dump_with_payloads",
    "record_fields",
    "record_payloads",
]

# The keys an attachment leaves out unless payloads are asked for (§6.1).
PAYLOAD_FIELDS: tuple[str, ...] = ("request", "response", "request_raw", "response_raw")

# The summed fields of §2.10, in the order the metrics object lists them.
AGGREGATE_FIELDS: tuple[str, ...] = (
    "tokens_in",
    "tokens_out",
    "tokens_reasoning",
    "tokens_total",
    "cached_tokens",
    "latency_total_ms",
)


class ModelServerRef(BaseModel):
    """Which Gym model server answered; any other ``type`` makes the record unbuildable."""

    type: Literal["responses_api_models"]
    name: str


class ModelCallRecord(BaseModel):
    """Gym's normalised record of one model call; fields in the contract's order."""

    # Extra keys are ignored (as in Gym); NaN/Infinity are refused so every record dumps as JSON.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    model_call_id: str | None = None
    response_id: str | None = None
    client_session_id: str | None = None
    call_index: int
    model_ref: ModelServerRef | None = None
    model: str | None = None
    dialect: str | None = None
    status_code: int | None = None
    response_status: str | None = None
    finish_reason: str | None = None
    started_at: float | None = None
    completed_at: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_reasoning: int | None = None
    tokens_total: int | None = None
    request: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    request_raw: str | None = None
    response_raw: str | None = None
    tool_calls: list[ToolCall] = []
    reasoning_content: str | None = None
    cache_hit: bool | None = None
    cached_tokens: int | None = None
    cache_creation_tokens: int | None = None
    error_category: str | None = None
    latency_total_ms: float | None = None
    latency_ttft_ms: float | None = None
    # Newer Gym consumers read these from attached calls; accepted and passed through.
    upstream_attempted: bool | None = None
    response_source: Literal["upstream", "local"] | None = None
    upstream_status_code: int | None = None
    local_response_reason: str | None = None


def _string_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _object_or_none(value: object) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def _finish_reason(response: Mapping[str, Any]) -> str | None:
    """First string among stop_reason, choices[0].finish_reason, incomplete_details.reason."""
    candidates: list[object] = [response.get("stop_reason")]
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        candidates.append(choices[0].get("finish_reason"))
    details = response.get("incomplete_details")
    if isinstance(details, Mapping):
        candidates.append(details.get("reason"))
    for candidate in candidates:
        if isinstance(candidate, str):
            return candidate
    return None


def record_payloads(exchange: Mapping[str, Any]) -> dict[str, Any]:
    """The payload fields (``PAYLOAD_FIELDS``) of the record an exchange builds, JSON-ready."""
    return {
        "request": _object_or_none(exchange.get("request")),
        "response": _object_or_none(exchange.get("response")),
        "request_raw": _string_or_none(exchange.get("request_raw")),
        "response_raw": _string_or_none(exchange.get("response_raw")),
    }


_RECORD_FIELDS: tuple[str, ...] = tuple(ModelCallRecord.model_fields)


def dump_with_payloads(
    dump_without_payloads: Mapping[str, Any], exchange: Mapping[str, Any]
) -> dict[str, Any]:
    """``build_model_call_record(exchange, i).model_dump(mode="json")``, from the dump without
    payloads of that same record: the payloads are copied from the exchange, in field order.

    The record is derived once per capture; its payload-free dump is stored, and the dump
    with payloads is put back together from it instead of deriving the record again.
    """
    payloads = record_payloads(exchange)
    return {
        name: payloads[name] if name in payloads else dump_without_payloads[name]
        for name in _RECORD_FIELDS
    }


def build_model_call_record(exchange: Mapping[str, Any], call_index: int) -> ModelCallRecord:
    """Derive the record of one raw exchange at durable position ``call_index``.

    Raises ValueError (pydantic's ValidationError is one) when the exchange cannot build a
    record: not an object, a ``model_ref`` of another type, or exchange values of the wrong type
    (e.g. a non-numeric ``status_code``). Gym's tolerant read counts such lines as damaged.
    """
    return ModelCallRecord.model_validate(record_fields(exchange, call_index))


def record_fields(exchange: Mapping[str, Any], call_index: int) -> dict[str, Any]:
    """What ``build_model_call_record`` validates: every field of the record, in field order,
    as the exchange gives it (tool calls, reasoning and token counts already extracted)."""
    if not isinstance(exchange, Mapping):
        raise ValueError(f"a capture exchange must be a JSON object, got {type(exchange).__name__}")
    payloads = record_payloads(exchange)
    request = payloads["request"]
    response = payloads["response"]
    body: Mapping[str, Any] = response if response is not None else {}
    tokens = extract_token_stats(response)
    tool_calls, reasoning = extract_tool_calls_and_reasoning(response)
    model = _string_or_none(body.get("model"))
    if model is None and request is not None:
        model = _string_or_none(request.get("model"))
    return {
        "model_call_id": exchange.get("model_call_id"),
        "response_id": _string_or_none(body.get("id")),
        "client_session_id": _string_or_none(exchange.get("client_session_id")),
        "call_index": call_index,
        "model_ref": exchange.get("model_ref"),
        "model": model,
        "dialect": exchange.get("dialect"),
        "status_code": exchange.get("status_code"),
        "response_status": _string_or_none(body.get("status")),
        "finish_reason": _finish_reason(body),
        "started_at": exchange.get("started_at"),
        "completed_at": exchange.get("completed_at"),
        "tokens_in": tokens.tokens_in,
        "tokens_out": tokens.tokens_out,
        "tokens_reasoning": tokens.tokens_reasoning,
        "tokens_total": tokens.tokens_total,
        "request": request,
        "response": response,
        "request_raw": payloads["request_raw"],
        "response_raw": payloads["response_raw"],
        "tool_calls": tool_calls,
        "reasoning_content": reasoning,
        "cache_hit": tokens.cache_hit,
        "cached_tokens": tokens.cached_tokens,
        "cache_creation_tokens": tokens.cache_creation_tokens,
        "error_category": exchange.get("error_category"),
        "latency_total_ms": exchange.get("latency_ms"),
        "latency_ttft_ms": exchange.get("latency_ttft_ms"),
        "upstream_attempted": exchange.get("upstream_attempted"),
        "response_source": exchange.get("response_source"),
        "upstream_status_code": exchange.get("upstream_status_code"),
        "local_response_reason": exchange.get("local_response_reason"),
    }


def aggregate_model_call_records(
    records: Sequence[ModelCallRecord],
) -> dict[str, int | float | None]:
    """Null-aware sums (None when no call has the value; None is not 0) and ``num_calls``.

    ``num_calls`` counts every record, failed calls included.
    """
    return aggregate_model_call_values(
        [{name: getattr(record, name) for name in AGGREGATE_FIELDS} for record in records]
    )


def aggregate_model_call_values(
    calls: Sequence[Mapping[str, int | float | None]],
) -> dict[str, int | float | None]:
    """``aggregate_model_call_records`` from each call's ``AGGREGATE_FIELDS`` values (summed in
    the same order, so float sums come out bit for bit the same)."""
    metrics: dict[str, int | float | None] = {}
    for name in AGGREGATE_FIELDS:
        total: int | float | None = None
        for call in calls:
            value = call[name]
            if value is not None:
                total = value if total is None else total + value
        metrics[name] = total
    metrics["num_calls"] = len(calls)
    return metrics
