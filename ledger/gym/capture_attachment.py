"""The ``ng_model_call_capture`` attachment and its gaps (Gym contract §5.3 and §6.1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledger.gym.model_calls import PAYLOAD_FIELDS, ModelCallRecord, aggregate_model_call_records

CAPTURE_GAP_NO_RECORDS = "model_call_capture_no_records"
CAPTURE_GAP_RECORDS_UNREADABLE = "model_call_capture_records_unreadable"
CAPTURE_GAP_INCOMPLETE = "model_call_capture_incomplete"
CAPTURE_GAP_PENDING = "model_call_capture_pending"
CAPTURE_GAP_UNREADABLE = "model_call_capture_unreadable"


def capture_gap(
    code: str, *, invocation_id: str | None = None, detail: str | None = None
) -> dict[str, Any]:
    """An ObservationGap as capture attachments serialise it: null fields left out."""
    gap: dict[str, Any] = {"code": code}
    if invocation_id is not None:
        gap["invocation_id"] = invocation_id
    if detail is not None:
        gap["detail"] = detail
    return gap


def capture_gaps(
    *,
    has_evidence: bool,
    record_count: int,
    damaged_count: int,
    incomplete: bool,
    pending: bool,
) -> list[dict[str, Any]]:
    """Gym's merge gaps, in its order: records_unreadable, then incomplete OR no_records, then
    the ledger's own pending.

    ``has_evidence`` = any capture line or incomplete marker exists for the rollout;
    ``damaged_count`` = lines that are not JSON objects plus exchanges that fail to build.
    The marker stands for the missing records: a marker with no lines is only
    ``incomplete`` (Gym 0.7.0's merge adds ``no_records`` only when there is no marker).
    """
    gaps: list[dict[str, Any]] = []
    if not has_evidence:
        gaps.append(capture_gap(CAPTURE_GAP_NO_RECORDS))
    else:
        if damaged_count > 0:
            gaps.append(
                capture_gap(CAPTURE_GAP_RECORDS_UNREADABLE, detail=f"count={damaged_count}")
            )
        if incomplete:
            gaps.append(capture_gap(CAPTURE_GAP_INCOMPLETE))
        elif record_count == 0 and damaged_count == 0:
            gaps.append(capture_gap(CAPTURE_GAP_NO_RECORDS))
    if pending:
        gaps.append(capture_gap(CAPTURE_GAP_PENDING))
    return gaps


def strip_payloads(call: Mapping[str, Any]) -> dict[str, Any]:
    """A call dump without ``request``, ``response``, ``request_raw`` and ``response_raw``."""
    return {key: value for key, value in call.items() if key not in PAYLOAD_FIELDS}


def build_capture_attachment(
    rollout_id: str,
    records: Sequence[ModelCallRecord],
    gaps: Sequence[Mapping[str, Any]],
    *,
    include_payloads: bool,
) -> dict[str, Any]:
    """``{"rollout_id", "metrics", "calls", "gaps"?}``; ``gaps`` only when non-empty."""
    calls = [record.model_dump(mode="json") for record in records]
    if not include_payloads:
        calls = [strip_payloads(call) for call in calls]
    return capture_attachment(rollout_id, aggregate_model_call_records(records), calls, gaps)


def capture_attachment(
    rollout_id: str,
    metrics: Mapping[str, Any],
    calls: Sequence[Any],
    gaps: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The attachment's shape from its parts (calls already dumped)."""
    attachment: dict[str, Any] = {
        "rollout_id": rollout_id,
        "metrics": dict(metrics),
        "calls": list(calls),
    }
    if gaps:
        attachment["gaps"] = [
            {key: value for key, value in gap.items() if value is not None} for gap in gaps
        ]
    return attachment
