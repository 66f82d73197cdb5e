"""§6.1–§6.2 attachment: the enriched record, payload stripping, failure fallback, export view."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from ledger.gym import record as record_module
from ledger.gym.export_view import export_view
from ledger.gym.record import RolloutEvidence, enrich_record
from ledger.gym.result import RolloutResult
from ledger.gym.trajectory_record import TrajectoryRecord
from tests.support.observations import capture_call

PAYLOADS = ("request", "response", "request_raw", "response_raw")
RESULT = RolloutResult.model_validate(
    {
        "task_id": "task-7",
        "_ng_task_index": 0,
        "_ng_rollout_index": 0,
        "resolved": True,
        "latency_ms": 50,
    }
)


def capture(*calls: dict[str, Any], gaps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    attachment: dict[str, Any] = {
        "rollout_id": "0-0",
        "metrics": {"num_calls": len(calls)},
        "calls": list(calls),
    }
    if gaps:
        attachment["gaps"] = gaps
    return attachment


def bundle(*records: dict[str, Any], gaps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"source": "agent", "records": list(records), "gaps": gaps or []}


ROOT = {
    "kind": "agent_invocation",
    "invocation_id": "root",
    "model_calls": [{"model_call_id": "c1"}],
    "conversation": [{"type": "message", "role": "user", "content": "hi"}],
}
CALL = capture_call(
    model_call_id="c1", request={"input": "hi"}, response={"output": []}, tokens_in=3
)


def test_record_carries_identity_and_every_attachment_in_order() -> None:
    record = enrich_record(
        RolloutEvidence(
            rollout_id="0-0", capture=capture(CALL), observations=bundle(ROOT), result=RESULT
        )
    )
    assert list(record) == [
        "task_id",
        "_ng_task_index",
        "_ng_rollout_index",
        "resolved",
        "ng_model_call_capture",
        "ng_agent_observations",
        "ng_trajectory",
        "ng_perf",
    ]
    assert record["ng_perf"]["total_latency_ms"] == 50


def test_successful_projection_moves_payloads_into_the_trajectory() -> None:
    raw = capture_call(model_call_id="c2", call_index=1, request_raw="r", response_raw="s")
    evidence = RolloutEvidence(rollout_id="0-0", capture=capture(CALL, raw), result=RESULT)
    record = enrich_record(evidence)
    for call in record["ng_model_call_capture"]["calls"]:
        assert not set(PAYLOADS) & set(call)
    calls = record["ng_trajectory"]["model_calls"]
    assert [(c["request"], c["response"]) for c in calls] == [
        ({"input": "hi"}, {"output": []}),
        ("r", "s"),
    ]
    # The evidence itself is untouched (the ledger keeps the originals).
    assert evidence.capture is not None
    assert evidence.capture["calls"][0]["request"] == {"input": "hi"}


def test_failed_projection_keeps_payloads_and_records_the_gap_on_the_capture() -> None:
    duplicate = capture(CALL, {**CALL, "call_index": 1})
    record = enrich_record(RolloutEvidence(rollout_id="0-0", capture=duplicate, result=RESULT))
    assert "ng_trajectory" not in record
    assert "ng_perf" not in record
    assert record["ng_model_call_capture"]["gaps"] == [
        {"code": "trajectory_projection_failed", "detail": "ValidationError"}
    ]
    assert all(
        call["request"] == {"input": "hi"} for call in record["ng_model_call_capture"]["calls"]
    )


def test_failed_projection_without_capture_records_the_gap_on_the_observations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(*args: Any, **kwargs: Any) -> TrajectoryRecord:
        raise RuntimeError("boom")

    monkeypatch.setattr(record_module, "build_trajectory_record", failing)
    record = enrich_record(
        RolloutEvidence(rollout_id="0-0", observations=bundle(ROOT), result=RESULT)
    )
    assert "ng_trajectory" not in record
    assert record["ng_agent_observations"]["gaps"][-1] == {
        "code": "trajectory_projection_failed",
        "invocation_id": None,
        "detail": "RuntimeError",
    }


def test_failed_projection_with_only_a_producer_trajectory_writes_a_minimal_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(*args: Any, **kwargs: Any) -> TrajectoryRecord:
        raise KeyError("boom")

    monkeypatch.setattr(record_module, "build_trajectory_record", failing)
    result = RESULT.model_copy(update={"ng_trajectory": {"task_id": "task-7", "rollout_id": "0-0"}})
    record = enrich_record(RolloutEvidence(rollout_id="0-0", result=result))
    assert record["ng_trajectory"] == {
        "schema_version": "1.0",
        "task_id": "task-7",
        "rollout_id": "0-0",
        "invocations": [],
        "turns": [],
        "model_calls": [],
        "tool_calls": [],
        "gaps": [
            {"code": "trajectory_projection_failed", "invocation_id": None, "detail": "KeyError"}
        ],
    }
    assert "ng_perf" not in record


def test_nothing_to_project_means_no_trajectory() -> None:
    record = enrich_record(RolloutEvidence(rollout_id="0-0", result=RESULT))
    assert record == {
        "task_id": "task-7",
        "_ng_task_index": 0,
        "_ng_rollout_index": 0,
        "resolved": True,
    }


@pytest.mark.parametrize("where", ["result", "observations", "producer"])
def test_multimodal_history_redacted_keeps_payloads_out_everywhere(where: str) -> None:
    gap = {"code": "multimodal_history_redacted"}
    result = RESULT
    observations = bundle(ROOT)
    if where == "result":
        result = RESULT.model_copy(
            update={"gaps": [RolloutResult.model_validate({"gaps": [gap]}).gaps[0]]}
        )
    elif where == "observations":
        observations = bundle(ROOT, gaps=[gap])
    else:
        result = RESULT.model_copy(
            update={"ng_trajectory": {"task_id": "task-7", "rollout_id": "0-0", "gaps": [gap]}}
        )
    record = enrich_record(
        RolloutEvidence(
            rollout_id="0-0", capture=capture(CALL), observations=observations, result=result
        )
    )
    assert not set(PAYLOADS) & set(record["ng_model_call_capture"]["calls"][0])
    model_call = record["ng_trajectory"]["model_calls"][0]
    assert (model_call["request"], model_call["response"]) == (None, None)
    assert {"code": "multimodal_history_redacted", "invocation_id": None, "detail": None} in record[
        "ng_trajectory"
    ]["gaps"]


def test_observations_that_fail_the_join_are_kept_with_a_capture_gap() -> None:
    # Stored before a rule tightened: duplicate invocation ids fail re-validation.
    broken = bundle(ROOT, ROOT)
    record = enrich_record(
        RolloutEvidence(rollout_id="0-0", capture=capture(CALL), observations=broken)
    )
    assert record["ng_agent_observations"] == broken
    trajectory_gaps = [(g["code"], g["detail"]) for g in record["ng_trajectory"]["gaps"]]
    assert ("agent_observation_join_failed", "ValidationError") in trajectory_gaps
    assert ("agent_observations_invalid", "ValidationError") in trajectory_gaps
    assert {"code": "agent_observation_join_failed", "detail": "ValidationError"} in record[
        "ng_model_call_capture"
    ]["gaps"]


def test_enriching_is_deterministic_and_idempotent_over_the_joined_bundle() -> None:
    evidence = RolloutEvidence(
        rollout_id="0-0", capture=capture(CALL), observations=bundle(ROOT), result=RESULT
    )
    first = enrich_record(evidence)
    again = enrich_record(
        RolloutEvidence(
            rollout_id="0-0",
            capture=capture(CALL),
            observations=first["ng_agent_observations"],
            result=RESULT,
        )
    )
    assert again == first


# --- export view ---------------------------------------------------------------------------


def test_export_view_drops_the_trajectory_and_payload_keys() -> None:
    stored = {
        "task_id": "t",
        "ng_model_call_capture": {
            "rollout_id": "0-0",
            "calls": [
                {"model_call_id": "c1", "request": {}, "response_raw": "x", "tokens_in": 1},
                "junk",
            ],
            "gaps": [{"code": "g"}],
        },
        "ng_trajectory": {"schema_version": "1.0"},
        "ng_perf": {"num_turns": 1},
    }
    before = copy.deepcopy(stored)
    assert export_view(stored) == {
        "task_id": "t",
        "ng_model_call_capture": {
            "rollout_id": "0-0",
            "calls": [{"model_call_id": "c1", "tokens_in": 1}],
            "gaps": [{"code": "g"}],
        },
        "ng_perf": {"num_turns": 1},
    }
    assert stored == before


def test_export_view_drops_malformed_capture_parts() -> None:
    assert export_view({"ng_model_call_capture": "oops", "x": 1}) == {"x": 1}
    assert export_view({"ng_model_call_capture": {"calls": "oops"}}) == {
        "ng_model_call_capture": {}
    }


# --- the result input ---------------------------------------------------------------------


def test_result_uses_gym_keys_and_refuses_unknown_ones() -> None:
    parsed = RolloutResult.model_validate(
        {
            "instance_id": "i",
            "_ng_task_index": 1,
            "_ng_rollout_index": 2,
            "_ng_attempt_index": 1,
            "_ng_rollout_id": "x-1",
        }
    )
    assert parsed.to_json() == {
        "instance_id": "i",
        "_ng_task_index": 1,
        "_ng_rollout_index": 2,
        "_ng_attempt_index": 1,
        "_ng_rollout_id": "x-1",
        "gaps": [],
    }
    with pytest.raises(ValidationError, match="Extra inputs"):
        RolloutResult.model_validate({"task_index": 1})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"_ng_attempt_index": -1}, "greater than or equal to 0"),
        ({"_ng_task_index": "3"}, "valid integer"),
        ({"_ng_rollout_id": "has/slash"}, "_ng_rollout_id must be a string of letters"),
        ({"_ng_rollout_id": ".hidden"}, "_ng_rollout_id must be a string of letters"),
        ({"latency_ms": -5}, "greater than or equal to 0"),
        ({"latency_ms": float("nan")}, "finite"),
        ({"task_id": True}, "task_id"),
        ({"task_id": "t" * 1001}, "at most 1000 characters"),
        ({"_ng_rollout_id": "r" * 201}, "at most 200 characters"),
        ({"gaps": [{"detail": "x"}]}, "code"),
    ],
)
def test_result_field_rules(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RolloutResult.model_validate(fields)
