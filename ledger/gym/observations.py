"""The observation contract of §5.1: what agents report about a rollout besides model calls.

Every model rejects unknown fields and re-validates on assignment, so a bundle that was valid
once cannot be edited into an invalid one. Error messages are Gym's, word for word: producers and
tests match on them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    FailFast,
    Field,
    ValidationError,
    model_validator,
)

from ledger.gym.capture_lines import MAX_MEASURE
from ledger.gym.response_items import checked_conversation_item

JsonObject = dict[str, Any]
ConversationItem = Annotated[JsonObject, AfterValidator(checked_conversation_item)]

MODEL_CALL_REF_REQUIRED = "model_call_id or both model_ref and response_id are required"
INVOCATION_ID_NOT_UNIQUE = "invocation_id must be unique within an observation bundle"
PARENT_CYCLE = "parent_invocation_id must not form a cycle"
TOOL_TIMING_ORDER = "completed_at must not be earlier than started_at"


def _kind_required(schema: dict[str, Any]) -> None:
    """Document ``kind`` as required: each model defaults it, but a record is picked by it
    (the discriminator refuses a record without one)."""
    if "kind" in schema.get("properties", {}):
        required = schema.setdefault("required", [])
        if "kind" not in required:
            required.append("kind")


class ObservationModel(BaseModel):
    # NaN/Infinity are refused: they are not JSON and could not be stored or hashed.
    model_config = ConfigDict(
        extra="forbid",
        validate_assignment=True,
        allow_inf_nan=False,
        json_schema_extra=_kind_required,
    )

    def __setattr__(self, name: str, value: Any) -> None:
        # Pydantic runs model validators after storing the new value, so a refused assignment
        # would leave the model invalid; put the previous value back before re-raising.
        if name not in type(self).model_fields:
            super().__setattr__(name, value)
            return
        previous = self.__dict__.get(name)
        try:
            super().__setattr__(name, value)
        except ValidationError:
            self.__dict__[name] = previous
            raise


class ModelServerRef(ObservationModel):
    """Which Gym model server answered (``config_types.ModelServerRef``)."""

    type: Literal["responses_api_models"] = "responses_api_models"
    name: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.type, self.name)


def _join_key_required(schema: dict[str, Any]) -> None:
    """Document ``MODEL_CALL_REF_REQUIRED`` (the validator below is the rule)."""
    schema["anyOf"] = [
        {"required": ["model_call_id"], "properties": {"model_call_id": _NON_EMPTY}},
        {
            "required": ["model_ref", "response_id"],
            "properties": {"model_ref": {"type": "object"}, "response_id": _NON_EMPTY},
        },
    ]


_NON_EMPTY = {"type": "string", "minLength": 1}


class ModelCallRef(ObservationModel):
    """Stable identifiers an agent can observe for one model call."""

    model_config = ConfigDict(json_schema_extra=_join_key_required)

    model_call_id: str | None = None
    model_ref: ModelServerRef | None = None
    response_id: str | None = None

    @model_validator(mode="after")
    def _validate_join_key(self) -> ModelCallRef:
        if self.model_call_id:
            return self
        if self.model_ref is not None and self.response_id:
            return self
        raise ValueError(MODEL_CALL_REF_REQUIRED)


InvocationStatus = Literal["completed", "failed", "incomplete", "unknown"]
ToolStatus = Literal["completed", "failed", "timeout", "cancelled", "incomplete", "unknown"]
SandboxOutcome = Literal[
    "completed", "failed", "timeout", "oom", "sandbox_error", "cancelled", "unknown"
]
CompactionOutcome = Literal["completed", "failed", "aborted", "unknown"]


class AgentInvocation(ObservationModel):
    """One root agent or subagent conversation observed by a harness."""

    kind: Literal["agent_invocation"] = "agent_invocation"
    invocation_id: str
    parent_invocation_id: str | None = None
    spawned_by_tool_call_id: str | None = None
    status: InvocationStatus = "unknown"
    duration_ms: float | None = Field(default=None, ge=0, le=MAX_MEASURE)
    error_type: str | None = None
    model_calls: Annotated[list[ModelCallRef], FailFast()] = Field(default_factory=list)
    # Responses API input items (messages, function_call, function_call_output, ...): each must
    # validate as Gym's NeMoGymResponseInputItem (ledger/gym/response_items.py), and is kept as
    # given: the ledger reads only ``type``, ``call_id`` and ``output`` from them.
    conversation: Annotated[list[ConversationItem], FailFast()] = Field(default_factory=list)


class ToolCallObservation(ObservationModel):
    """Timing observed for one tool call at an agent-owned boundary."""

    kind: Literal["tool_call"] = "tool_call"
    invocation_id: str
    tool_call_id: str
    sandbox_id: str | None = None
    tool_name: str | None = None
    started_at: float | None = Field(default=None, ge=-MAX_MEASURE, le=MAX_MEASURE)
    completed_at: float | None = Field(default=None, ge=-MAX_MEASURE, le=MAX_MEASURE)
    duration_ms: float | None = Field(default=None, ge=0, le=MAX_MEASURE)
    timing_source: Literal["executor", "artifact", "harness"] | None = None
    status: ToolStatus = "unknown"
    error_type: str | None = None

    @model_validator(mode="after")
    def _validate_timing(self) -> ToolCallObservation:
        if (
            self.started_at is not None
            and self.completed_at is not None
            and self.completed_at < self.started_at
        ):
            raise ValueError(TOOL_TIMING_ORDER)
        return self


class TrajectoryToolCall(ToolCallObservation):
    """A tool observation enriched with the model-visible output (only in a trajectory)."""

    output: Any = None


class SandboxObservation(ObservationModel):
    """Outcome and lifetime resource usage reported by a sandbox-owning harness."""

    kind: Literal["sandbox"] = "sandbox"
    role: Literal["agent", "verifier", "environment"]
    provider: str | None = None
    sandbox_id: str | None = None
    outcome: SandboxOutcome = "unknown"
    exit_code: int | None = None
    wall_time_s: float | None = Field(default=None, ge=0, le=MAX_MEASURE)
    cpu_time_s: float | None = Field(default=None, ge=0, le=MAX_MEASURE)
    peak_memory_mib: float | None = Field(default=None, ge=0, le=MAX_MEASURE)
    resource_usage_source: str | None = None
    error_type: str | None = None


class ContextCompactionObservation(ObservationModel):
    """An explicit context compaction. Token counts are independent: after may exceed before."""

    kind: Literal["context_compaction"] = "context_compaction"
    invocation_id: str
    observed_at: float | None = Field(default=None, ge=-MAX_MEASURE, le=MAX_MEASURE)
    trigger: str | None = None
    tokens_before: int | None = Field(default=None, ge=0)
    tokens_after: int | None = Field(default=None, ge=0)
    outcome: CompactionOutcome = "unknown"
    summary: str | None = None
    first_kept_item_id: str | None = None
    before_model_call: ModelCallRef | None = None
    model_calls: Annotated[list[ModelCallRef], FailFast()] = Field(default_factory=list)
    after_model_call: ModelCallRef | None = None


class ObservationGap(ObservationModel):
    """A fact the integration could not observe or join exactly."""

    code: str
    invocation_id: str | None = None
    detail: str | None = None

    @property
    def identity(self) -> tuple[str, str | None, str | None]:
        return (self.code, self.invocation_id, self.detail)


# ``kind`` picks the model; any other kind (``turn`` included) is rejected by the discriminator.
AgentObservationRecord = Annotated[
    AgentInvocation | ToolCallObservation | ContextCompactionObservation | SandboxObservation,
    Field(discriminator="kind"),
]


class AgentObservationBundle(ObservationModel):
    """Normalised observations returned by one agent server for one rollout."""

    source: str
    records: Annotated[list[AgentObservationRecord], FailFast()] = Field(default_factory=list)
    gaps: Annotated[list[ObservationGap], FailFast()] = Field(default_factory=list)

    @model_validator(mode="after")
    def _validate_identity(self) -> AgentObservationBundle:
        parents: dict[str, str | None] = {}
        for record in self.records:
            if isinstance(record, AgentInvocation):
                if record.invocation_id in parents:
                    raise ValueError(INVOCATION_ID_NOT_UNIQUE)
                parents[record.invocation_id] = record.parent_invocation_id
        if _has_parent_cycle(parents):
            raise ValueError(PARENT_CYCLE)
        return self

    @property
    def invocations(self) -> list[AgentInvocation]:
        return [record for record in self.records if isinstance(record, AgentInvocation)]


def _has_parent_cycle(parents: dict[str, str | None]) -> bool:
    """True when following parent links from some invocation comes back to a visited one.

    Unknown parents end a chain (they are allowed: the parent may not have been observed).
    """
    cleared: set[str] = set()
    for start in parents:
        path: set[str] = set()
        node: str | None = start
        while node is not None and node in parents and node not in cleared:
            if node in path:
                return True
            path.add(node)
            node = parents[node]
        cleared |= path
    return False


def gap_dump(gap: ObservationGap) -> JsonObject:
    """A gap as capture attachments serialise it: null fields left out."""
    return gap.model_dump(mode="json", exclude_none=True)
