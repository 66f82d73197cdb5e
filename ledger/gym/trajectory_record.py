"""The ``ng_trajectory`` document models of §5.1 (``TrajectoryRecord`` and its parts)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ledger.gym.observations import (
    AgentInvocation,
    ModelCallRef,
    ModelServerRef,
    ObservationGap,
    ObservationModel,
    TrajectoryToolCall,
)

TRAJECTORY_SCHEMA_VERSION = "1.0"
INVOCATION_ID_NOT_UNIQUE_IN_TRAJECTORY = "invocation_id must be unique within a trajectory"
MODEL_CALL_ID_NOT_UNIQUE = "model_call_id must be unique within a trajectory"
TURN_IDENTITY_MISMATCH = "every turn's task_id and rollout_id must equal the trajectory's"
TURN_NOT_UNIQUE = "(invocation_id, turn_no) must be unique within a trajectory"


class TrajectoryTokenStats(ObservationModel):
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)
    total_tokens: int | None = Field(default=None, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)


class TrajectoryResponseMetadata(ObservationModel):
    response_id: str | None = None
    model_ref: ModelServerRef | None = None
    model: str | None = None
    dialect: str | None = None
    status_code: int | None = None
    response_status: str | None = None
    finish_reason: str | None = None
    upstream_attempted: bool | None = None
    response_source: Literal["upstream", "local"] | None = None
    upstream_status_code: int | None = None
    local_response_reason: str | None = None
    error_category: str | None = None
    latency_ttft_ms: float | None = Field(default=None, ge=0)


class TrajectoryModelCall(ObservationModel):
    model_call_id: str | None = None
    started_at: float | None = None
    completed_at: float | None = None
    duration_ms: float | None = Field(default=None, ge=0)
    request: Any = None
    response: Any = None
    response_metadata: TrajectoryResponseMetadata = Field(
        default_factory=TrajectoryResponseMetadata
    )
    token_stats: TrajectoryTokenStats = Field(default_factory=TrajectoryTokenStats)


class TrajectoryTurn(ObservationModel):
    invocation_id: str
    task_id: str
    rollout_id: str
    turn_no: int = Field(ge=1)
    timestamp: float
    question: Any = None
    answer: Any = None
    reasoning_content: Any = None
    resolved: bool | None = None
    step_count: int = Field(ge=0)
    model_calls: list[ModelCallRef] = Field(default_factory=list)


class TrajectoryRecord(ObservationModel):
    schema_version: Literal["1.0"] = "1.0"
    task_id: str
    rollout_id: str
    invocations: list[AgentInvocation] = Field(default_factory=list)
    turns: list[TrajectoryTurn] = Field(default_factory=list)
    model_calls: list[TrajectoryModelCall] = Field(default_factory=list)
    tool_calls: list[TrajectoryToolCall] = Field(default_factory=list)
    gaps: list[ObservationGap] = Field(default_factory=list)

    @model_validator(mode="after")
    def _validate_identity(self) -> TrajectoryRecord:
        invocation_ids = [invocation.invocation_id for invocation in self.invocations]
        if len(set(invocation_ids)) != len(invocation_ids):
            raise ValueError(INVOCATION_ID_NOT_UNIQUE_IN_TRAJECTORY)
        call_ids = [call.model_call_id for call in self.model_calls if call.model_call_id]
        if len(set(call_ids)) != len(call_ids):
            raise ValueError(MODEL_CALL_ID_NOT_UNIQUE)
        seen_turns: set[tuple[str, int]] = set()
        for turn in self.turns:
            if turn.task_id != self.task_id or turn.rollout_id != self.rollout_id:
                raise ValueError(TURN_IDENTITY_MISMATCH)
            key = (turn.invocation_id, turn.turn_no)
            if key in seen_turns:
                raise ValueError(TURN_NOT_UNIQUE)
            seen_turns.add(key)
        return self
