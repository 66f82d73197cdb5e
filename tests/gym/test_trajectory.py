"""§6.2 ``ng_trajectory`` projection, rule by rule."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.gym.observations import ObservationGap
from ledger.gym.result import RolloutResult, TrajectoryIdentity, trajectory_identity
from ledger.gym.trajectory import build_trajectory_record, trajectory_model_call
from tests.support.observations import capture_call, model_ref

IDENTITY = TrajectoryIdentity(task_id="task-7", rollout_id="0-0")
POLICY = model_ref("policy")


def gaps_of(record: Any) -> list[tuple[str, str | None, str | None]]:
    return [(gap.code, gap.invocation_id, gap.detail) for gap in record.gaps]


def invocation(invocation_id: str, *conversation: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "kind": "agent_invocation",
        "invocation_id": invocation_id,
        "conversation": list(conversation),
        **fields,
    }


def observations(
    *records: dict[str, Any], gaps: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"source": "agent", "records": list(records), "gaps": gaps or []}


def producer(**fields: Any) -> dict[str, Any]:
    return {"schema_version": "1.0", "task_id": "task-7", "rollout_id": "0-0", **fields}


def turn(invocation_id: str, turn_no: int, timestamp: float, **fields: Any) -> dict[str, Any]:
    return {
        "invocation_id": invocation_id,
        "task_id": "task-7",
        "rollout_id": "0-0",
        "turn_no": turn_no,
        "timestamp": timestamp,
        "step_count": 1,
        **fields,
    }


MESSAGE = {"type": "message", "role": "user", "content": "hi"}


# --- identity -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (
            {"task_id": "task-7", "problem_id": "p", "_ng_task_index": 3, "_ng_rollout_index": 1},
            ("task-7", "3-1"),
        ),
        (
            {"problem_id": 42, "instance_id": "i", "_ng_task_index": 3, "_ng_rollout_index": 1},
            ("42", "3-1"),
        ),
        (
            {"instance_id": "django-1", "_ng_task_index": 3, "_ng_rollout_index": 1},
            ("django-1", "3-1"),
        ),
        ({"_ng_task_index": 3, "_ng_rollout_index": 1, "_ng_attempt_index": 2}, ("3", "3-1-a2")),
        ({"_ng_task_index": 3, "_ng_rollout_index": 1, "_ng_attempt_index": 0}, ("3", "3-1")),
        (
            {"_ng_task_index": 3, "_ng_rollout_id": "custom.id", "_ng_attempt_index": 1},
            ("3", "custom.id-a1"),
        ),
        ({"task_id": "t"}, ("t", "ledger-key")),
    ],
)
def test_identity_follows_the_row(result: dict[str, Any], expected: tuple[str, str]) -> None:
    identity = trajectory_identity(RolloutResult.model_validate(result), "ledger-key")
    assert (identity.task_id, identity.rollout_id) == expected


@pytest.mark.parametrize(
    ("ledger_id", "expected"),
    [
        ("4-2", ("4", "4-2")),
        ("4-2-a1", ("4", "4-2-a1")),
        ("run7.step3", ("run7.step3", "run7.step3")),
    ],
)
def test_identity_without_a_result_comes_from_the_ledger_id(
    ledger_id: str, expected: tuple[str, str]
) -> None:
    identity = trajectory_identity(None, ledger_id)
    assert (identity.task_id, identity.rollout_id) == expected


# --- producer trajectory ------------------------------------------------------------------


def test_producer_trajectory_seeds_the_record() -> None:
    seeded = producer(
        invocations=[invocation("root", MESSAGE)],
        turns=[turn("root", 2, 5.0), turn("root", 1, 5.0), turn("a", 1, 1.0)],
        model_calls=[{"model_call_id": "p1", "token_stats": {"prompt_tokens": 3}}],
        tool_calls=[
            {
                "kind": "tool_call",
                "invocation_id": "root",
                "tool_call_id": "t1",
                "status": "completed",
            }
        ],
        gaps=[{"code": "resolution_unavailable"}],
    )
    record = build_trajectory_record(IDENTITY, producer_trajectory=seeded)
    # Turns sorted by (timestamp, invocation_id, turn_no); no turns_unavailable gap.
    assert [(t.invocation_id, t.turn_no) for t in record.turns] == [
        ("a", 1),
        ("root", 1),
        ("root", 2),
    ]
    assert [call.model_call_id for call in record.model_calls] == ["p1"]
    assert [t.tool_call_id for t in record.tool_calls] == ["t1"]
    assert gaps_of(record) == [("resolution_unavailable", None, None)]


@pytest.mark.parametrize(
    ("task_id", "rollout_id", "detail"),
    [
        ("other", "0-0", "task_id"),
        ("task-7", "9-9", "rollout_id"),
        ("other", "9-9", "task_id,rollout_id"),
    ],
)
def test_producer_identity_mismatch_is_a_gap_and_turns_take_canonical_ids(
    task_id: str, rollout_id: str, detail: str
) -> None:
    seeded = producer(
        task_id=task_id,
        rollout_id=rollout_id,
        invocations=[invocation("root", MESSAGE)],
        turns=[turn("root", 1, 1.0, task_id=task_id, rollout_id=rollout_id)],
        model_calls=[{"model_call_id": "p1"}],
    )
    record = build_trajectory_record(IDENTITY, producer_trajectory=seeded)
    assert (record.task_id, record.rollout_id) == ("task-7", "0-0")
    assert [(t.task_id, t.rollout_id) for t in record.turns] == [("task-7", "0-0")]
    assert gaps_of(record) == [("producer_trajectory_identity_mismatch", None, detail)]


def test_invalid_producer_trajectory_is_a_gap() -> None:
    record = build_trajectory_record(
        IDENTITY, producer_trajectory={"task_id": "task-7", "rollout_id": "0-0", "turns": "many"}
    )
    # A producer trajectory was supplied, so no turns_unavailable even with zero turns.
    assert gaps_of(record) == [
        ("producer_trajectory_invalid", None, "ValidationError"),
        ("model_calls_unavailable", None, None),
        ("conversation_unavailable", None, None),
    ]


def test_producer_gaps_of_the_result_follow_the_producer_trajectory_gaps() -> None:
    record = build_trajectory_record(
        IDENTITY,
        producer_trajectory=producer(gaps=[{"code": "a"}]),
        producer_gaps=[ObservationGap(code="multimodal_history_redacted")],
    )
    assert [gap.code for gap in record.gaps][:2] == ["a", "multimodal_history_redacted"]


# --- agent observations -------------------------------------------------------------------


def test_invalid_observations_are_a_gap() -> None:
    record = build_trajectory_record(
        IDENTITY, observations={"source": "a", "records": [{"kind": "turn"}]}
    )
    assert gaps_of(record)[0] == ("agent_observations_invalid", None, "ValidationError")


def test_observed_invocations_are_added_unless_the_producer_has_them() -> None:
    seeded = producer(invocations=[invocation("root", MESSAGE, status="completed")])
    observed = observations(
        invocation("root", status="failed"), invocation("sub", MESSAGE), gaps=[{"code": "g"}]
    )
    record = build_trajectory_record(IDENTITY, producer_trajectory=seeded, observations=observed)
    assert [(i.invocation_id, i.status) for i in record.invocations] == [
        ("root", "completed"),
        ("sub", "unknown"),
    ]
    assert ("g", None, None) in gaps_of(record)


def test_tool_observations_merge_into_producer_tool_calls() -> None:
    seeded = producer(
        invocations=[invocation("root", MESSAGE)],
        tool_calls=[
            {
                "kind": "tool_call",
                "invocation_id": "root",
                "tool_call_id": "t1",
                "tool_name": "grep",
                "status": "completed",
                "started_at": 1.0,
            },
            {
                "kind": "tool_call",
                "invocation_id": "root",
                "tool_call_id": "t2",
                "status": "failed",
            },
        ],
    )
    observed = observations(
        invocation(
            "root",
            {"type": "function_call", "call_id": "t1", "name": "grep", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "t1", "output": "match"},
            {
                "type": "function_call_output",
                "call_id": "t3",
                "output": [{"type": "input_text", "text": "2 rows"}],
            },
            {"type": "function_call_output", "call_id": "t1", "output": "later copy"},
        ),
        # unknown never overwrites a known status; non-null observed fields win.
        {
            "kind": "tool_call",
            "invocation_id": "root",
            "tool_call_id": "t1",
            "status": "unknown",
            "completed_at": 3.0,
            "timing_source": "executor",
        },
        {
            "kind": "tool_call",
            "invocation_id": "root",
            "tool_call_id": "t2",
            "status": "timeout",
            "duration_ms": 50,
        },
        {"kind": "tool_call", "invocation_id": "root", "tool_call_id": "t3", "status": "completed"},
        {"kind": "tool_call", "invocation_id": "sub", "tool_call_id": "t1"},
    )
    record = build_trajectory_record(IDENTITY, producer_trajectory=seeded, observations=observed)
    tools = [t.model_dump(exclude_none=True) for t in record.tool_calls]
    assert tools == [
        {
            "kind": "tool_call",
            "invocation_id": "root",
            "tool_call_id": "t1",
            "tool_name": "grep",
            "started_at": 1.0,
            "completed_at": 3.0,
            "timing_source": "executor",
            "status": "completed",
            "output": "match",
        },
        {
            "kind": "tool_call",
            "invocation_id": "root",
            "tool_call_id": "t2",
            "duration_ms": 50.0,
            "status": "timeout",
        },
        {
            "kind": "tool_call",
            "invocation_id": "root",
            "tool_call_id": "t3",
            "status": "completed",
            "output": [{"type": "input_text", "text": "2 rows"}],
        },
        # Same tool_call_id in another invocation is another tool call, with no output there.
        {"kind": "tool_call", "invocation_id": "sub", "tool_call_id": "t1", "status": "unknown"},
    ]


def test_a_merge_that_breaks_timing_order_fails_the_projection() -> None:
    seeded = producer(
        tool_calls=[
            {"kind": "tool_call", "invocation_id": "root", "tool_call_id": "t1", "started_at": 10.0}
        ]
    )
    observed = observations(
        {"kind": "tool_call", "invocation_id": "root", "tool_call_id": "t1", "completed_at": 5.0}
    )
    with pytest.raises(ValueError, match="completed_at must not be earlier than started_at"):
        build_trajectory_record(IDENTITY, producer_trajectory=seeded, observations=observed)


# --- capture calls ------------------------------------------------------------------------


def test_capture_call_becomes_a_trajectory_model_call() -> None:
    call = capture_call(
        model_call_id="c1",
        response_id="resp-1",
        model_ref=POLICY,
        model="m",
        dialect="responses",
        status_code=200,
        finish_reason="stop",
        started_at=100.0,
        completed_at=100.5,
        latency_total_ms=500.0,
        latency_ttft_ms=20.0,
        tokens_in=12,
        tokens_out=8,
        tokens_reasoning=3,
        tokens_total=20,
        cached_tokens=4,
        request={"input": "x"},
        response={"id": "resp-1", "status": "completed"},
        error_category=None,
        upstream_attempted=True,
        response_source="upstream",
        upstream_status_code=200,
    )
    assert trajectory_model_call(call) == {
        "model_call_id": "c1",
        "started_at": 100.0,
        "completed_at": 100.5,
        "duration_ms": 500.0,
        "request": {"input": "x"},
        "response": {"id": "resp-1", "status": "completed"},
        "response_metadata": {
            "response_id": "resp-1",
            "model_ref": POLICY,
            "model": "m",
            "dialect": "responses",
            "status_code": 200,
            "response_status": "completed",
            "finish_reason": "stop",
            "upstream_attempted": True,
            "response_source": "upstream",
            "upstream_status_code": 200,
            "latency_ttft_ms": 20.0,
        },
        "token_stats": {
            "prompt_tokens": 12,
            "completion_tokens": 8,
            "reasoning_tokens": 3,
            "total_tokens": 20,
            "cached_tokens": 4,
        },
    }


def test_raw_payloads_stand_in_and_response_status_fills_only_when_absent() -> None:
    raw = trajectory_model_call(capture_call(request_raw="not json", response_raw="data: x"))
    assert (raw["request"], raw["response"]) == ("not json", "data: x")
    explicit = trajectory_model_call(
        capture_call(response_status="incomplete", response={"status": "completed"})
    )
    assert explicit["response_metadata"] == {"response_status": "incomplete"}
    non_string = trajectory_model_call(capture_call(response={"status": 3}))
    assert non_string["response_metadata"] == {}


def test_only_non_negative_int_token_counts_are_taken() -> None:
    stats = trajectory_model_call(
        capture_call(
            tokens_in=True, tokens_out=-1, tokens_reasoning=2.0, tokens_total="9", cached_tokens=0
        )
    )["token_stats"]
    assert stats == {"cached_tokens": 0}


def test_capture_call_merges_into_the_producer_call_with_the_same_id() -> None:
    seeded = producer(
        model_calls=[
            {
                "model_call_id": "c1",
                "started_at": 1.0,
                "request": {"producer": True},
                "response_metadata": {"model": "producer-model", "dialect": "chat"},
                "token_stats": {"prompt_tokens": 1, "reasoning_tokens": 5},
            },
            {"model_call_id": "p-only"},
        ]
    )
    capture = {
        "calls": [
            capture_call(model_call_id="c1", model="captured", tokens_in=12),
            capture_call(model_call_id="c2", call_index=1),
        ]
    }
    record = build_trajectory_record(IDENTITY, producer_trajectory=seeded, capture=capture)
    merged = record.model_calls[0].model_dump(exclude_none=True)
    assert merged == {
        "model_call_id": "c1",
        "started_at": 1.0,
        "request": {"producer": True},
        "response_metadata": {"model": "captured", "dialect": "chat"},
        "token_stats": {"prompt_tokens": 12, "reasoning_tokens": 5},
    }
    assert [call.model_call_id for call in record.model_calls] == ["c1", "p-only", "c2"]


def test_capture_gaps_are_copied_and_invalid_ones_flagged() -> None:
    capture = {
        "calls": [capture_call(model_call_id="c1")],
        "gaps": [{"code": "model_call_capture_incomplete"}, {"detail": "no code"}, "junk"],
    }
    record = build_trajectory_record(IDENTITY, capture=capture)
    assert gaps_of(record) == [
        ("model_call_capture_incomplete", None, None),
        ("model_call_capture_gap_invalid", None, None),
        ("turns_unavailable", None, None),
        ("conversation_unavailable", None, None),
    ]


def test_duplicate_captured_ids_fail_the_projection() -> None:
    capture = {
        "calls": [capture_call(model_call_id="c1"), capture_call(model_call_id="c1", call_index=1)]
    }
    with pytest.raises(ValueError, match="model_call_id must be unique within a trajectory"):
        build_trajectory_record(IDENTITY, capture=capture)


# --- derived gaps and de-duplication ------------------------------------------------------


def test_no_evidence_at_all_gives_the_three_unavailable_gaps() -> None:
    record = build_trajectory_record(IDENTITY, capture={"calls": []})
    assert record.model_dump()["turns"] == []
    assert gaps_of(record) == [
        ("model_calls_unavailable", None, None),
        ("turns_unavailable", None, None),
        ("conversation_unavailable", None, None),
    ]


def test_turns_are_never_derived_from_calls_or_conversations() -> None:
    observed = observations(invocation("root", MESSAGE, model_calls=[{"model_call_id": "c1"}]))
    record = build_trajectory_record(
        IDENTITY, observations=observed, capture={"calls": [capture_call(model_call_id="c1")]}
    )
    assert record.turns == []
    assert gaps_of(record) == [("turns_unavailable", None, None)]


def test_gaps_are_deduplicated_first_occurrence_kept() -> None:
    observed = observations(
        invocation("root", MESSAGE),
        gaps=[
            {"code": "x", "detail": "1"},
            {"code": "x", "detail": "1"},
            {"code": "x", "invocation_id": "root", "detail": "1"},
        ],
    )
    seeded = producer(gaps=[{"code": "x", "detail": "1"}, {"code": "turns_unavailable"}])
    record = build_trajectory_record(IDENTITY, producer_trajectory=seeded, observations=observed)
    assert gaps_of(record) == [
        ("x", None, "1"),
        ("turns_unavailable", None, None),
        ("x", "root", "1"),
        ("model_calls_unavailable", None, None),
    ]
