"""The ``ng_trajectory`` projection of §6.2 (Gym's ``_build_trajectory_record``).

Inputs are what the collector holds after the merge: an optional producer trajectory, the joined
agent observations and the capture attachment. Turns are never derived here (§6.2): with no
producer turns the record has ``turns: []`` and a ``turns_unavailable`` gap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ledger.gym.join import dedupe_gaps
from ledger.gym.observations import (
    AgentInvocation,
    AgentObservationBundle,
    ObservationGap,
    ToolCallObservation,
    TrajectoryToolCall,
)
from ledger.gym.result import TrajectoryIdentity
from ledger.gym.trajectory_record import TrajectoryModelCall, TrajectoryRecord, TrajectoryTurn

PRODUCER_IDENTITY_MISMATCH = "producer_trajectory_identity_mismatch"
PRODUCER_INVALID = "producer_trajectory_invalid"
OBSERVATIONS_INVALID = "agent_observations_invalid"
CAPTURE_GAP_INVALID = "model_call_capture_gap_invalid"
MODEL_CALLS_UNAVAILABLE = "model_calls_unavailable"
TURNS_UNAVAILABLE = "turns_unavailable"
CONVERSATION_UNAVAILABLE = "conversation_unavailable"

METADATA_KEYS = (
    "response_id",
    "model_ref",
    "model",
    "dialect",
    "status_code",
    "response_status",
    "finish_reason",
    "upstream_attempted",
    "response_source",
    "upstream_status_code",
    "local_response_reason",
    "error_category",
    "latency_ttft_ms",
)
TOKEN_STATS_FROM_CAPTURE = (
    ("prompt_tokens", "tokens_in"),
    ("completion_tokens", "tokens_out"),
    ("reasoning_tokens", "tokens_reasoning"),
    ("total_tokens", "tokens_total"),
    ("cached_tokens", "cached_tokens"),
)


def _count(value: object) -> int | None:
    """Token counts are taken only when they are real non-negative ints (bools are not)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def trajectory_model_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """One captured call (a ModelCallRecord dump) as a ``TrajectoryModelCall`` dict."""
    request = call.get("request")
    response = call.get("response")
    metadata = {key: call[key] for key in METADATA_KEYS if call.get(key) is not None}
    if isinstance(response, Mapping) and isinstance(response.get("status"), str):
        metadata.setdefault("response_status", response["status"])
    token_stats = {
        stat: count
        for stat, source in TOKEN_STATS_FROM_CAPTURE
        if (count := _count(call.get(source))) is not None
    }
    projected: dict[str, Any] = {
        "model_call_id": call.get("model_call_id"),
        "started_at": call.get("started_at"),
        "completed_at": call.get("completed_at"),
        "duration_ms": call.get("latency_total_ms"),
        "request": request if request is not None else call.get("request_raw"),
        "response": response if response is not None else call.get("response_raw"),
        "response_metadata": metadata,
        "token_stats": token_stats,
    }
    return projected


def _merge_captured_into(producer: dict[str, Any], captured: dict[str, Any]) -> dict[str, Any]:
    """Captured non-null values win; metadata and token stats merge key by key."""
    merged = dict(producer)
    for key, value in captured.items():
        if key in ("response_metadata", "token_stats"):
            merged[key] = {**(producer.get(key) or {}), **value}
        elif value is not None:
            merged[key] = value
    return merged


def _conversation_outputs(invocations: Sequence[AgentInvocation]) -> dict[tuple[str, str], Any]:
    """Model-visible tool outputs by (invocation_id, call_id); the first item of a pair wins."""
    outputs: dict[tuple[str, str], Any] = {}
    for invocation in invocations:
        for item in invocation.conversation:
            call_id = item.get("call_id")
            if item.get("type") == "function_call_output" and isinstance(call_id, str):
                outputs.setdefault((invocation.invocation_id, call_id), item.get("output"))
    return outputs


def _merge_tool_observation(
    existing: TrajectoryToolCall, observed: ToolCallObservation
) -> TrajectoryToolCall:
    """Observed non-null fields update the entry; an observed ``unknown`` never hides a status."""
    updates: dict[str, Any] = {}
    for name, value in observed.model_dump().items():
        if value is None:
            continue
        if name == "status" and value == "unknown" and existing.status != "unknown":
            continue
        updates[name] = value
    return TrajectoryToolCall.model_validate({**existing.model_dump(), **updates})


class _Builder:
    def __init__(self, identity: TrajectoryIdentity) -> None:
        self.identity = identity
        self.invocations: list[AgentInvocation] = []
        self.turns: list[TrajectoryTurn] = []
        self.model_calls: list[dict[str, Any]] = []
        self.tool_calls: list[TrajectoryToolCall] = []
        self.gaps: list[ObservationGap] = []

    def gap(self, code: str, detail: str | None = None) -> None:
        self.gaps.append(ObservationGap(code=code, detail=detail))

    def seed_from_producer(self, producer: object) -> None:
        try:
            record = TrajectoryRecord.model_validate(producer)
        except ValidationError as exc:
            self.gap(PRODUCER_INVALID, type(exc).__name__)
            return
        self.gaps.extend(record.gaps)
        self.invocations.extend(record.invocations)
        self.tool_calls.extend(record.tool_calls)
        self.model_calls.extend(call.model_dump() for call in record.model_calls)
        differing = [
            name
            for name, value in (("task_id", record.task_id), ("rollout_id", record.rollout_id))
            if value != getattr(self.identity, name)
        ]
        if differing:
            self.gap(PRODUCER_IDENTITY_MISMATCH, ",".join(differing))
        self.turns.extend(
            turn.model_copy(
                update={"task_id": self.identity.task_id, "rollout_id": self.identity.rollout_id}
            )
            for turn in record.turns
        )

    def add_observations(self, observations: object) -> None:
        try:
            bundle = AgentObservationBundle.model_validate(observations)
        except ValidationError as exc:
            self.gap(OBSERVATIONS_INVALID, type(exc).__name__)
            return
        self.gaps.extend(bundle.gaps)
        known = {invocation.invocation_id for invocation in self.invocations}
        self.invocations.extend(
            invocation for invocation in bundle.invocations if invocation.invocation_id not in known
        )
        # The trajectory's invocations first, then the observed ones: an observed conversation
        # still supplies outputs when the producer's copy of that invocation was kept.
        outputs = _conversation_outputs([*self.invocations, *bundle.invocations])
        positions = {
            (tool.invocation_id, tool.tool_call_id): position
            for position, tool in reversed(list(enumerate(self.tool_calls)))
        }
        for record in bundle.records:
            if not isinstance(record, ToolCallObservation):
                continue
            key = (record.invocation_id, record.tool_call_id)
            position = positions.get(key)
            if position is None:
                merged = TrajectoryToolCall.model_validate(record.model_dump())
                positions[key] = len(self.tool_calls)
                self.tool_calls.append(merged)
            else:
                merged = _merge_tool_observation(self.tool_calls[position], record)
                self.tool_calls[position] = merged
            if key in outputs:
                self.tool_calls[positions[key]] = merged.model_copy(update={"output": outputs[key]})

    def add_capture(self, capture: Mapping[str, Any]) -> None:
        calls = capture.get("calls")
        by_id = {
            call["model_call_id"]: position
            for position, call in reversed(list(enumerate(self.model_calls)))
            if call.get("model_call_id")
        }
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, Mapping):
                continue
            captured = trajectory_model_call(call)
            position = by_id.get(captured["model_call_id"]) if captured["model_call_id"] else None
            if position is None:
                self.model_calls.append(captured)
            else:
                self.model_calls[position] = _merge_captured_into(
                    self.model_calls[position], captured
                )
        gaps = capture.get("gaps")
        for gap in gaps if isinstance(gaps, list) else []:
            try:
                self.gaps.append(ObservationGap.model_validate(gap))
            except ValidationError:
                self.gap(CAPTURE_GAP_INVALID)

    def build(self, *, producer_supplied: bool) -> TrajectoryRecord:
        self.turns.sort(key=lambda turn: (turn.timestamp, turn.invocation_id, turn.turn_no))
        if not self.model_calls:
            self.gap(MODEL_CALLS_UNAVAILABLE)
        if not self.turns and not producer_supplied:
            self.gap(TURNS_UNAVAILABLE)
        if not any(invocation.conversation for invocation in self.invocations):
            self.gap(CONVERSATION_UNAVAILABLE)
        return TrajectoryRecord(
            task_id=self.identity.task_id,
            rollout_id=self.identity.rollout_id,
            invocations=self.invocations,
            turns=self.turns,
            model_calls=[TrajectoryModelCall.model_validate(call) for call in self.model_calls],
            tool_calls=self.tool_calls,
            gaps=dedupe_gaps(self.gaps),
        )


def build_trajectory_record(
    identity: TrajectoryIdentity,
    *,
    producer_trajectory: object = None,
    producer_gaps: Sequence[ObservationGap] = (),
    observations: object = None,
    capture: Mapping[str, Any] | None = None,
) -> TrajectoryRecord:
    """Project the evidence into one ``TrajectoryRecord``; raises when the result is invalid.

    ``producer_gaps`` are the gaps a result reports outside a producer trajectory; they are
    recorded right after the producer trajectory's own gaps.
    """
    builder = _Builder(identity)
    if producer_trajectory is not None:
        builder.seed_from_producer(producer_trajectory)
    builder.gaps.extend(producer_gaps)
    if observations is not None:
        builder.add_observations(observations)
    if capture is not None:
        builder.add_capture(capture)
    return builder.build(producer_supplied=producer_trajectory is not None)
