"""What the rollout collector knows about a finished attempt (``POST /v1/rollouts/{id}/result``).

Field names follow Gym's result row: ``task_id`` / ``problem_id`` / ``instance_id`` and the
``_ng_*`` identity keys are copied as Gym writes them; ``latency_ms`` is the dispatcher-measured
wall-clock latency that becomes ``ng_perf.total_latency_ms``; ``ng_trajectory`` is a producer
trajectory, kept as given (the projection validates it and records a gap when it is invalid,
as Gym's collector does); ``gaps`` are producer gaps such as ``multimodal_history_redacted``;
``response`` is the agent's response (Gym's ``NeMoGymResponse``), kept as given: its
``usage``, the sum over the model responses that finished, is what the token-count health
check compares with the capture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    FailFast,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
)

from ledger.gym.capture_lines import MAX_MEASURE
from ledger.gym.ids import (
    MAX_ROLLOUT_ID_LENGTH,
    ROLLOUT_ID_PATTERN,
    ROLLOUT_ID_SCHEMA,
    split_transport_rollout_id,
)
from ledger.gym.observations import ObservationGap

ROLLOUT_ID_MESSAGE = (
    "_ng_rollout_id must be a string of letters, digits, dots, dashes or underscores "
    "starting with a letter or digit; got {value!r}"
)
_TASK_ROLLOUT_ID = re.compile(r"^(\d+)-(\d+)$")
IDENTITY_KEYS = (
    "task_id",
    "problem_id",
    "instance_id",
    "_ng_task_index",
    "_ng_rollout_index",
    "_ng_attempt_index",
    "_ng_rollout_id",
)


# Task ids are indexed for export filters; the bound keeps them indexable on every backend.
MAX_TASK_KEY_LENGTH = 1000
# Documented only: the JSON body reader refuses any integer outside 64 bits (422) first.
INT64_SCHEMA: dict[str, Any] = {"minimum": -(2**63), "maximum": 2**63 - 1}
Int64 = Annotated[StrictInt, Field(json_schema_extra=INT64_SCHEMA)]
Index = Annotated[StrictInt, Field(ge=0, json_schema_extra={"maximum": 2**63 - 1})]
TaskKey = Annotated[StrictStr, Field(max_length=MAX_TASK_KEY_LENGTH)] | Int64


class RolloutResult(BaseModel):
    """Input of ``POST /v1/rollouts/{id}/result``; the ``_ng_*`` keys are spelled as in Gym."""

    # Serialised by alias: the ``_ng_*`` keys are stored and returned as Gym spells them.
    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, allow_inf_nan=False, serialize_by_alias=True
    )

    task_id: TaskKey | None = None
    problem_id: TaskKey | None = None
    instance_id: TaskKey | None = None
    task_index: Index | None = Field(default=None, alias="_ng_task_index")
    rollout_index: Index | None = Field(default=None, alias="_ng_rollout_index")
    attempt_index: Index | None = Field(default=None, alias="_ng_attempt_index")
    explicit_rollout_id: StrictStr | None = Field(
        default=None,
        alias="_ng_rollout_id",
        max_length=MAX_ROLLOUT_ID_LENGTH,
        json_schema_extra=ROLLOUT_ID_SCHEMA,
    )
    resolved: StrictBool | None = None
    # An int stays an int: ``ng_perf.total_latency_ms`` repeats the value as measured.
    latency_ms: int | float | None = Field(
        default=None,
        ge=0,
        le=MAX_MEASURE,
        # On a union pydantic documents neither bound; the document states them.
        json_schema_extra={"minimum": 0, "maximum": MAX_MEASURE},
    )
    ng_trajectory: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    gaps: Annotated[list[ObservationGap], FailFast()] = Field(default_factory=list)

    @field_validator("latency_ms", mode="before")
    @classmethod
    def _check_latency(cls, value: object) -> object:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError("latency_ms must be a number of milliseconds")
        return value

    @field_validator("explicit_rollout_id")
    @classmethod
    def _check_rollout_id(cls, value: str | None) -> str | None:
        if value is not None and ROLLOUT_ID_PATTERN.fullmatch(value) is None:
            raise ValueError(ROLLOUT_ID_MESSAGE.format(value=value))
        return value

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def identity_fields(self) -> dict[str, Any]:
        """The row identity Gym copies onto the result, in Gym's key order, nulls left out."""
        dumped = self.model_dump(mode="json")
        return {key: dumped[key] for key in IDENTITY_KEYS if dumped[key] is not None}


@dataclass(frozen=True)
class TrajectoryIdentity:
    task_id: str
    rollout_id: str


def derive_rollout_id(result: RolloutResult) -> str | None:
    """§4: explicit ``_ng_rollout_id``, else ``<task>-<rollout>``; ``-a<n>`` for attempt n > 0."""
    if result.explicit_rollout_id is not None:
        base = result.explicit_rollout_id
    elif result.task_index is not None and result.rollout_index is not None:
        base = f"{result.task_index}-{result.rollout_index}"
    else:
        return None
    attempt = result.attempt_index or 0
    return f"{base}-a{attempt}" if attempt > 0 else base


def trajectory_identity(result: RolloutResult | None, ledger_rollout_id: str) -> TrajectoryIdentity:
    """§6.2 identity. Without a result (or without ids in it) the ledger's own id stands in.

    Gym always has the row; the ledger may project before the result arrives, so the task id is
    then read from a ``<task>-<rollout>[-a<n>]`` rollout id, else the whole logical id is used.
    """
    rollout_id = None if result is None else derive_rollout_id(result)
    task_id: str | None = None
    if result is not None:
        for value in (result.task_id, result.problem_id, result.instance_id):
            if value is not None:
                task_id = str(value)
                break
        if task_id is None and result.task_index is not None:
            task_id = str(result.task_index)
    if task_id is None:
        logical, _attempt = split_transport_rollout_id(ledger_rollout_id)
        assert logical is not None
        match = _TASK_ROLLOUT_ID.fullmatch(logical)
        task_id = match.group(1) if match is not None else logical
    return TrajectoryIdentity(task_id=task_id, rollout_id=rollout_id or ledger_rollout_id)
