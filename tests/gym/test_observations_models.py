"""§5.1: every observation model forbids unknown fields and enforces its rules on assignment."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from ledger.gym.observations import (
    AgentInvocation,
    AgentObservationBundle,
    ContextCompactionObservation,
    ModelCallRef,
    ObservationGap,
    SandboxObservation,
    ToolCallObservation,
    TrajectoryToolCall,
    gap_dump,
)
from ledger.gym.trajectory_record import (
    TrajectoryModelCall,
    TrajectoryRecord,
    TrajectoryResponseMetadata,
    TrajectoryTokenStats,
    TrajectoryTurn,
)
from tests.support.observations import model_ref

REF_MESSAGE = "model_call_id or both model_ref and response_id are required"


def error_text(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    return str(exc.value)


def invocation(invocation_id: str, parent: str | None = None) -> dict[str, Any]:
    return {
        "kind": "agent_invocation",
        "invocation_id": invocation_id,
        "parent_invocation_id": parent,
    }


MINIMAL: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (ModelCallRef, {"model_call_id": "c1"}),
    (AgentInvocation, {"invocation_id": "root"}),
    (ToolCallObservation, {"invocation_id": "root", "tool_call_id": "t1"}),
    (TrajectoryToolCall, {"invocation_id": "root", "tool_call_id": "t1", "output": "42"}),
    (SandboxObservation, {"role": "agent"}),
    (ContextCompactionObservation, {"invocation_id": "root"}),
    (ObservationGap, {"code": "tool_timing_unavailable"}),
    (AgentObservationBundle, {"source": "agent", "records": []}),
    (TrajectoryTokenStats, {}),
    (TrajectoryResponseMetadata, {}),
    (TrajectoryModelCall, {}),
    (
        TrajectoryTurn,
        {
            "invocation_id": "root",
            "task_id": "t",
            "rollout_id": "0-0",
            "turn_no": 1,
            "timestamp": 1.0,
            "step_count": 0,
        },
    ),
    (TrajectoryRecord, {"task_id": "t", "rollout_id": "0-0"}),
]


@pytest.mark.parametrize(("model", "fields"), MINIMAL, ids=[m.__name__ for m, _ in MINIMAL])
def test_every_model_rejects_unknown_fields(model: type[BaseModel], fields: dict[str, Any]) -> None:
    model.model_validate(fields)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        model.model_validate({**fields, "surprise": 1})


# --- ModelCallRef -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"model_call_id": "c1"},
        {"model_ref": model_ref(), "response_id": "resp-1"},
        {"model_call_id": "c1", "model_ref": model_ref(), "response_id": "resp-1"},
    ],
)
def test_model_call_ref_accepts_an_id_or_the_ref_and_response_pair(fields: dict[str, Any]) -> None:
    assert ModelCallRef.model_validate(fields).model_dump(exclude_none=True) == fields


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"model_call_id": ""},
        {"response_id": "resp-1"},
        {"model_ref": model_ref()},
        {"model_ref": model_ref(), "response_id": ""},
    ],
)
def test_model_call_ref_needs_an_exact_join_key(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as exc:
        ModelCallRef.model_validate(fields)
    assert REF_MESSAGE in error_text(exc)


def test_model_call_ref_is_revalidated_on_assignment() -> None:
    ref = ModelCallRef(model_call_id="c1")
    with pytest.raises(ValidationError) as exc:
        ref.model_call_id = None
    assert REF_MESSAGE in error_text(exc)


def test_model_ref_type_must_be_responses_api_models() -> None:
    with pytest.raises(ValidationError, match="responses_api_models"):
        ModelCallRef.model_validate(
            {"model_ref": {"type": "agents", "name": "x"}, "response_id": "r"}
        )


# --- AgentInvocation ----------------------------------------------------------------------


def test_invocation_defaults_and_status_values() -> None:
    parsed = AgentInvocation.model_validate({"invocation_id": "root"})
    assert parsed.model_dump() == {
        "kind": "agent_invocation",
        "invocation_id": "root",
        "parent_invocation_id": None,
        "spawned_by_tool_call_id": None,
        "status": "unknown",
        "duration_ms": None,
        "error_type": None,
        "model_calls": [],
        "conversation": [],
    }
    with pytest.raises(ValidationError, match="status"):
        AgentInvocation.model_validate({"invocation_id": "root", "status": "done"})


def test_invocation_duration_must_not_be_negative() -> None:
    AgentInvocation.model_validate({"invocation_id": "root", "duration_ms": 0})
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        AgentInvocation.model_validate({"invocation_id": "root", "duration_ms": -1})


def test_invocation_model_call_refs_are_validated() -> None:
    with pytest.raises(ValidationError) as exc:
        AgentInvocation.model_validate(
            {"invocation_id": "root", "model_calls": [{"response_id": "r"}]}
        )
    assert REF_MESSAGE in error_text(exc)


# --- ToolCallObservation ------------------------------------------------------------------


def test_tool_call_timing_order() -> None:
    equal = {"invocation_id": "r", "tool_call_id": "t", "started_at": 5.0, "completed_at": 5.0}
    ToolCallObservation.model_validate(equal)
    with pytest.raises(ValidationError, match="completed_at must not be earlier than started_at"):
        ToolCallObservation.model_validate({**equal, "completed_at": 4.5})


def test_tool_call_timing_is_checked_on_assignment() -> None:
    tool = ToolCallObservation(invocation_id="r", tool_call_id="t", started_at=5.0)
    with pytest.raises(ValidationError, match="completed_at must not be earlier than started_at"):
        tool.completed_at = 1.0
    assert tool.completed_at is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("duration_ms", -0.5), ("timing_source", "clock"), ("status", "done")],
)
def test_tool_call_field_rules(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        ToolCallObservation.model_validate(
            {"invocation_id": "r", "tool_call_id": "t", field: value}
        )


def test_output_exists_only_on_trajectory_tool_calls() -> None:
    with pytest.raises(ValidationError, match="output"):
        ToolCallObservation.model_validate({"invocation_id": "r", "tool_call_id": "t", "output": 1})
    assert TrajectoryToolCall.model_validate(
        {"invocation_id": "r", "tool_call_id": "t", "output": {"x": 1}}
    ).output == {"x": 1}


# --- SandboxObservation -------------------------------------------------------------------


def test_sandbox_needs_a_role_and_known_outcome() -> None:
    with pytest.raises(ValidationError, match="role"):
        SandboxObservation.model_validate({})
    with pytest.raises(ValidationError, match="outcome"):
        SandboxObservation.model_validate({"role": "agent", "outcome": "exploded"})
    assert (
        SandboxObservation.model_validate({"role": "verifier", "outcome": "oom"}).outcome == "oom"
    )


@pytest.mark.parametrize("field", ["wall_time_s", "cpu_time_s", "peak_memory_mib"])
def test_sandbox_usage_must_not_be_negative(field: str) -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        SandboxObservation.model_validate({"role": "agent", field: -1})


# --- ContextCompactionObservation ---------------------------------------------------------


def test_compaction_token_counts_are_independent_but_non_negative() -> None:
    grew = ContextCompactionObservation.model_validate(
        {"invocation_id": "r", "tokens_before": 10, "tokens_after": 50}
    )
    assert (grew.tokens_before, grew.tokens_after) == (10, 50)
    for field in ("tokens_before", "tokens_after"):
        with pytest.raises(ValidationError, match="greater than or equal to 0"):
            ContextCompactionObservation.model_validate({"invocation_id": "r", field: -1})


def test_compaction_refs_are_validated() -> None:
    with pytest.raises(ValidationError) as exc:
        ContextCompactionObservation.model_validate(
            {"invocation_id": "r", "before_model_call": {"model_ref": model_ref()}}
        )
    assert REF_MESSAGE in error_text(exc)


# --- ObservationGap -----------------------------------------------------------------------


def test_gap_serialisation_with_and_without_nulls() -> None:
    gap = ObservationGap(code="trajectory_projection_failed", detail="ValueError")
    assert gap.model_dump() == {
        "code": "trajectory_projection_failed",
        "invocation_id": None,
        "detail": "ValueError",
    }
    assert gap_dump(gap) == {"code": "trajectory_projection_failed", "detail": "ValueError"}


# --- AgentObservationBundle ---------------------------------------------------------------


def test_bundle_dispatches_records_by_kind() -> None:
    bundle = AgentObservationBundle.model_validate(
        {
            "source": "agent",
            "records": [
                invocation("root"),
                {"kind": "tool_call", "invocation_id": "root", "tool_call_id": "t1"},
                {"kind": "context_compaction", "invocation_id": "root"},
                {"kind": "sandbox", "role": "environment"},
            ],
        }
    )
    assert [type(record).__name__ for record in bundle.records] == [
        "AgentInvocation",
        "ToolCallObservation",
        "ContextCompactionObservation",
        "SandboxObservation",
    ]


def test_bundle_rejects_a_turn_record() -> None:
    turn = {
        "kind": "turn",
        "invocation_id": "root",
        "task_id": "t",
        "rollout_id": "0-0",
        "turn_no": 1,
        "timestamp": 1.0,
        "step_count": 0,
    }
    with pytest.raises(ValidationError, match="'turn'"):
        AgentObservationBundle.model_validate({"source": "agent", "records": [turn]})


def test_bundle_invocation_ids_are_unique() -> None:
    with pytest.raises(
        ValidationError, match="invocation_id must be unique within an observation bundle"
    ):
        AgentObservationBundle.model_validate(
            {"source": "a", "records": [invocation("root"), invocation("root")]}
        )


@pytest.mark.parametrize(
    "records",
    [
        [invocation("a", "a")],
        [invocation("a", "b"), invocation("b", "a")],
        [invocation("root"), invocation("a", "c"), invocation("b", "a"), invocation("c", "b")],
    ],
    ids=["self", "pair", "triangle-below-root"],
)
def test_bundle_parent_chains_must_not_cycle(records: list[dict[str, Any]]) -> None:
    with pytest.raises(ValidationError, match="parent_invocation_id must not form a cycle"):
        AgentObservationBundle.model_validate({"source": "a", "records": records})


def test_bundle_allows_unknown_parents_and_deep_trees() -> None:
    records = [invocation("child", "never-observed"), invocation("root")]
    records += [invocation(f"n{i}", "root" if i == 0 else f"n{i - 1}") for i in range(50)]
    bundle = AgentObservationBundle.model_validate({"source": "a", "records": records})
    assert len(bundle.invocations) == 52


def test_bundle_rules_hold_on_assignment() -> None:
    bundle = AgentObservationBundle.model_validate({"source": "a", "records": [invocation("root")]})
    with pytest.raises(ValidationError, match="invocation_id must be unique"):
        bundle.records = [AgentInvocation(invocation_id="x"), AgentInvocation(invocation_id="x")]
    assert [record.invocation_id for record in bundle.invocations] == ["root"]
    first = bundle.invocations[0]
    with pytest.raises(ValidationError, match="status"):
        first.status = "nope"  # type: ignore[assignment]


def test_bundle_refuses_non_finite_numbers() -> None:
    with pytest.raises(ValidationError, match="finite"):
        AgentObservationBundle.model_validate(
            {
                "source": "a",
                "records": [{"kind": "sandbox", "role": "agent", "wall_time_s": float("inf")}],
            }
        )


# --- Trajectory models --------------------------------------------------------------------


def test_token_stats_are_non_negative_ints() -> None:
    assert TrajectoryTokenStats(prompt_tokens=0).prompt_tokens == 0
    for field in (
        "prompt_tokens",
        "completion_tokens",
        "reasoning_tokens",
        "total_tokens",
        "cached_tokens",
    ):
        with pytest.raises(ValidationError, match="greater than or equal to 0"):
            TrajectoryTokenStats.model_validate({field: -1})


def test_response_metadata_rules() -> None:
    with pytest.raises(ValidationError, match="response_source"):
        TrajectoryResponseMetadata.model_validate({"response_source": "cache"})
    with pytest.raises(ValidationError, match="latency_ttft_ms"):
        TrajectoryResponseMetadata.model_validate({"latency_ttft_ms": -3})
    assert (
        TrajectoryResponseMetadata.model_validate(
            {
                "response_source": "local",
                "upstream_attempted": False,
                "local_response_reason": "cache",
            }
        ).response_source
        == "local"
    )


def test_turn_rules() -> None:
    turn = {"invocation_id": "r", "task_id": "t", "rollout_id": "0-0", "timestamp": 1.0}
    with pytest.raises(ValidationError, match="turn_no"):
        TrajectoryTurn.model_validate({**turn, "turn_no": 0, "step_count": 0})
    with pytest.raises(ValidationError, match="step_count"):
        TrajectoryTurn.model_validate({**turn, "turn_no": 1, "step_count": -1})


def trajectory(**fields: Any) -> dict[str, Any]:
    return {"task_id": "t", "rollout_id": "0-0", **fields}


def turn(invocation_id: str, turn_no: int, **fields: Any) -> dict[str, Any]:
    base = {"invocation_id": invocation_id, "task_id": "t", "rollout_id": "0-0"}
    return {**base, "turn_no": turn_no, "timestamp": 1.0, "step_count": 1, **fields}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"invocations": [invocation("a"), invocation("a")]},
            "invocation_id must be unique within a trajectory",
        ),
        (
            {"model_calls": [{"model_call_id": "c"}, {"model_call_id": "c"}]},
            "model_call_id must be unique within a trajectory",
        ),
        ({"turns": [turn("a", 1, task_id="other")]}, "task_id and rollout_id must equal"),
        ({"turns": [turn("a", 1, rollout_id="0-1")]}, "task_id and rollout_id must equal"),
        ({"turns": [turn("a", 1), turn("a", 1)]}, r"\(invocation_id, turn_no\) must be unique"),
        ({"schema_version": "2.0"}, "schema_version"),
    ],
)
def test_trajectory_record_identity_rules(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TrajectoryRecord.model_validate(trajectory(**fields))


def test_trajectory_record_allows_calls_without_ids_and_distinct_turns() -> None:
    record = TrajectoryRecord.model_validate(
        trajectory(
            model_calls=[{}, {}, {"model_call_id": "c"}],
            turns=[turn("a", 1), turn("a", 2), turn("b", 1)],
        )
    )
    assert record.schema_version == "1.0"
    assert len(record.model_calls) == 3
