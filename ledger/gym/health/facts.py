"""What the checks read from one record: identity, transcript usage, the canonical trajectory
(validated as Gym's collector validates it, defaults filled in), its observability flags and
its model calls, normalised."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger.gym.trajectory_record import TrajectoryRecord

TRAJECTORY_PROJECTION_FAILED = "trajectory_projection_failed"
TURNS_UNAVAILABLE = "turns_unavailable"
TURN_MODEL_CALL_SCOPE_INCOMPLETE = "turn_model_call_scope_incomplete"
INCOMPLETE_CAPTURE_GAPS = frozenset(
    {
        "model_calls_unavailable",
        "model_call_capture_incomplete",
        "model_call_capture_records_unreadable",
        "model_call_capture_unreadable",
    }
)
# A producer's reference gap, and the mismatch kind it stands for.
CONTRADICTION_GAPS = {
    "model_call_reference_unmatched": "missing_captured_call",
    "model_call_reference_ambiguous": "duplicated_captured_call",
    "model_call_reference_conflict": "conflicting_call_ownership",
}
FAILED_RESPONSE_STATUSES = frozenset({"failed", "error", "cancelled"})


def is_count(value: object) -> bool:
    """A real non-negative int (bool is not a count)."""
    return type(value) is int and value >= 0


@dataclass(frozen=True)
class Call:
    """One entry of ``ng_trajectory.model_calls``, flattened for the checks."""

    call_index: int
    started_at: Any
    model_call_id: Any
    response_id: Any
    model_ref: Any
    status_code: Any
    response_status: Any
    finish_reason: Any
    error_category: Any
    tokens_in: Any
    tokens_out: Any
    response: Any

    @property
    def failed(self) -> bool:
        status = self.status_code
        return (
            (isinstance(status, int) and status >= 400)
            or bool(self.error_category)
            or (
                isinstance(self.response_status, str)
                and self.response_status in FAILED_RESPONSE_STATUSES
            )
        )

    @property
    def successful(self) -> bool:
        status = self.status_code
        return not self.failed and (
            status is None or (isinstance(status, int) and 200 <= status < 400)
        )

    @property
    def identity(self) -> str | None:
        """How replays of one call are recognised: its id, else its response id."""
        if self.model_call_id:
            return f"call:{self.model_call_id}"
        if isinstance(self.model_ref, dict) and self.response_id:
            ref = self.model_ref
            return f"response:{ref.get('type')}:{ref.get('name')}:{self.response_id}"
        if self.response_id:
            return f"response::{self.response_id}"
        return None

    def locator(self, fallback: int) -> dict[str, Any]:
        return {"call_id": str(self.model_call_id or self.response_id or fallback)}


def _call(position: int, raw: Mapping[str, Any]) -> Call:
    metadata = raw.get("response_metadata") or {}
    tokens = raw.get("token_stats") or {}
    return Call(
        call_index=position,
        started_at=raw.get("started_at"),
        model_call_id=raw.get("model_call_id"),
        response_id=metadata.get("response_id"),
        model_ref=metadata.get("model_ref"),
        status_code=metadata.get("status_code"),
        response_status=metadata.get("response_status"),
        finish_reason=metadata.get("finish_reason"),
        error_category=metadata.get("error_category"),
        tokens_in=tokens.get("prompt_tokens"),
        tokens_out=tokens.get("completion_tokens"),
        response=raw.get("response"),
    )


@dataclass(frozen=True)
class Usage:
    prompt: int | None
    completion: int | None

    @property
    def present(self) -> bool:
        return self.prompt is not None and self.completion is not None


def transcript_usage(record: Mapping[str, Any]) -> Usage:
    """``response.usage``: Responses names first; a present key holding null does not fall back."""
    response = record.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return Usage(None, None)
    prompt = usage["input_tokens"] if "input_tokens" in usage else usage.get("prompt_tokens")
    completion = (
        usage["output_tokens"] if "output_tokens" in usage else usage.get("completion_tokens")
    )
    return Usage(prompt if is_count(prompt) else None, completion if is_count(completion) else None)


@dataclass(frozen=True)
class RecordFacts:
    """One physical record as the checks see it."""

    ordinal: int
    task_index: Any
    rollout_index: Any
    stage_index: Any
    rollout_id: str
    record: dict[str, Any] | None
    # The class name of the parse failure (None when the line is a JSON object).
    parse_error: str | None = None
    source_file: str | None = None
    line_number: int | None = None
    trajectory: dict[str, Any] | None = None
    trajectory_error: str | None = None
    usage: Usage = field(default_factory=lambda: Usage(None, None))

    @property
    def gap_codes(self) -> list[Any]:
        gaps = (self.trajectory or {}).get("gaps") or []
        return [gap.get("code") for gap in gaps if isinstance(gap, dict)]

    @property
    def trajectory_observed(self) -> bool:
        return self.trajectory is not None and TRAJECTORY_PROJECTION_FAILED not in self.gap_codes

    @property
    def turns_observed(self) -> bool:
        return self.trajectory_observed and TURNS_UNAVAILABLE not in self.gap_codes

    @property
    def turn_call_scope_complete(self) -> bool:
        return self.trajectory_observed and TURN_MODEL_CALL_SCOPE_INCOMPLETE not in self.gap_codes

    @property
    def model_calls_observed(self) -> bool:
        return self.trajectory_observed and not any(
            code in INCOMPLETE_CAPTURE_GAPS for code in self.gap_codes
        )

    @property
    def contradiction_gaps(self) -> list[dict[str, Any]]:
        gaps = (self.trajectory or {}).get("gaps") or []
        return [g for g in gaps if isinstance(g, dict) and g.get("code") in CONTRADICTION_GAPS]

    @property
    def turns(self) -> list[dict[str, Any]]:
        return list((self.trajectory or {}).get("turns") or [])

    def calls(self) -> list[Call]:
        if not self.trajectory_observed or self.trajectory is None:
            return []
        return [_call(i, raw) for i, raw in enumerate(self.trajectory.get("model_calls") or [])]


def unreadable_facts(
    ordinal: int, error: str, *, file_index: int, source_file: str, line_number: int
) -> RecordFacts:
    return RecordFacts(
        ordinal=ordinal,
        task_index=f"__unreadable_record__:input-{file_index}:line-{line_number}",
        rollout_index=0,
        stage_index=None,
        rollout_id=f"__unreadable_record__:input-{file_index}:line-{line_number}-0",
        record=None,
        parse_error=error,
        source_file=source_file,
        line_number=line_number,
    )


def record_facts(
    record: dict[str, Any], ordinal: int, *, canonical_trajectory: bool = False
) -> RecordFacts:
    """``canonical_trajectory``: the record's ``ng_trajectory`` is already a TrajectoryRecord
    dump (the ledger's stored records: the projection writes nothing else), so validating and
    dumping it again would give it back unchanged; skip that (most of a check's cost)."""
    task_index = record.get("_ng_task_index", ordinal)
    rollout_index = record.get("_ng_rollout_index", 0)
    raw_trajectory = record.get("ng_trajectory")
    trajectory: dict[str, Any] | None = None
    trajectory_error: str | None = None
    if raw_trajectory is not None and canonical_trajectory and isinstance(raw_trajectory, dict):
        trajectory = raw_trajectory
    elif raw_trajectory is not None:
        try:
            trajectory = TrajectoryRecord.model_validate(raw_trajectory).model_dump(mode="json")
        except Exception as exc:  # Gym records the class name; so do we
            trajectory_error = type(exc).__name__
    raw_id = raw_trajectory.get("rollout_id") if isinstance(raw_trajectory, dict) else None
    rollout_id = str(record.get("_ng_rollout_id") or raw_id or f"{task_index}-{rollout_index}")
    return RecordFacts(
        ordinal=ordinal,
        task_index=task_index,
        rollout_index=rollout_index,
        stage_index=record.get("stage_index"),
        rollout_id=rollout_id,
        record=record,
        trajectory=trajectory,
        trajectory_error=trajectory_error,
        usage=transcript_usage(record),
    )
