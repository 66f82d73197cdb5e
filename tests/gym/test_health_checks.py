"""Each rollout check of Gym 0.7.0's registry: when it fires, its finding, when it is unobserved."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.gym.health.evaluate import RolloutDigest, evaluate
from ledger.gym.health.facts import record_facts
from ledger.gym.health.run import check_records
from tests.gym.health_records import JUDGE, POLICY, model_call, record, turn


def digest(rec: dict[str, Any], ignored: tuple[str, ...] = ()) -> RolloutDigest:
    return evaluate(record_facts(rec, 0), ignored)


def found(rec: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [f.line() for f in digest(rec).findings if f.check == check]


def test_a_clean_rollout_is_healthy_with_every_check_evaluated() -> None:
    d = digest(record(usage=(10, 5)))
    assert (d.verdict, d.findings, d.unobserved) == ("healthy", (), ())


def test_zero_completion_tokens() -> None:
    rec = record(calls=[model_call("c", completion=0)])
    assert found(rec, "model_call_zero_completion_tokens") == [
        {
            "check": "model_call_zero_completion_tokens",
            "locator": {"call_id": "c"},
            "detail": {"completion_tokens": 0},
        }
    ]


def test_missing_token_counts_lists_what_is_missing_in_order() -> None:
    rec = record(
        calls=[model_call("a", prompt=None), model_call("b", prompt=None, completion=None)]
    )
    assert [f["detail"] for f in found(rec, "model_call_missing_token_counts")] == [
        {"missing": ["prompt_tokens"]},
        {"missing": ["prompt_tokens", "completion_tokens"]},
    ]
    # Each finding names its own call.
    assert [f["locator"] for f in found(rec, "model_call_missing_token_counts")] == [
        {"call_id": "a"},
        {"call_id": "b"},
    ]


def test_failed_call_and_terminal_flag() -> None:
    rec = record(
        calls=[model_call("a", status=429, error="rate_limited"), model_call("b", started=2.0)]
    )
    assert found(rec, "model_call_failed") == [
        {
            "check": "model_call_failed",
            "locator": {"call_id": "a"},
            "detail": {"status": 429, "error_category": "rate_limited", "terminal": False},
        }
    ]
    last = record(calls=[model_call("a"), model_call("b", status=500, started=2.0)])
    assert found(last, "model_call_failed")[0]["detail"]["terminal"] is True


def test_failure_by_response_status_or_category_without_status() -> None:
    rec = record(calls=[model_call("a", status=None, response_status="cancelled")])
    assert found(rec, "model_call_failed")[0]["detail"] == {
        "status": None,
        "error_category": None,
        "terminal": True,
    }
    assert digest(rec).errors_by_status == {"unknown": 1}


def test_terminal_is_false_when_owned_bindings_are_incomplete() -> None:
    rec = record(
        calls=[model_call("a", status=500)],
        turns=[turn("0-0", 1, ["a", "ghost"])],
    )
    assert found(rec, "model_call_failed")[0]["detail"]["terminal"] is False


def test_ended_on_failed_model_call_per_model_chain() -> None:
    # The policy recovered; the judge's last call failed.
    rec = record(
        calls=[
            model_call("p1", status=500, started=1.0),
            model_call("p2", started=2.0),
            model_call("j1", status=503, error="unavailable", model_ref=JUDGE, started=3.0),
        ]
    )
    assert found(rec, "rollout_ended_on_failed_model_call") == [
        {
            "check": "rollout_ended_on_failed_model_call",
            "locator": {"call_id": "j1"},
            "detail": {
                "model_ref": "responses_api_models/judge",
                "status": 503,
                "error_category": "unavailable",
                "observed_calls": 1,
                "successful_calls": 0,
            },
        }
    ]


def test_ended_on_failure_needs_start_times_when_a_chain_mixes_outcomes() -> None:
    rec = record(calls=[model_call("a", started=None), model_call("b", status=500, started=2.0)])
    assert found(rec, "rollout_ended_on_failed_model_call") == []
    assert digest(rec).ended_on_error is False
    every = record(calls=[model_call("a", status=500, started=None), model_call("b", status=502)])
    assert found(every, "rollout_ended_on_failed_model_call")[0]["detail"]["observed_calls"] == 2


def test_a_long_chain_mixing_outcomes_is_judged_by_its_last_call_in_time() -> None:
    """Four calls to one model, failures and successes alternating, listed out of time order:
    the chain ended on a failure (the latest start), which the finding locates; the same
    outcomes ending on a success find nothing."""
    rec = record(
        calls=[
            model_call("p4", status=502, started=4.0),
            model_call("p1", started=1.0),
            model_call("p3", started=3.0),
            model_call("p2", status=500, started=2.0),
        ]
    )
    assert found(rec, "rollout_ended_on_failed_model_call") == [
        {
            "check": "rollout_ended_on_failed_model_call",
            "locator": {"call_id": "p4"},
            "detail": {
                "model_ref": "responses_api_models/policy",
                "status": 502,
                "error_category": None,
                "observed_calls": 4,
                "successful_calls": 2,
            },
        }
    ]
    assert digest(rec).ended_on_error is True
    recovered = record(
        calls=[
            model_call("p1", status=500, started=1.0),
            model_call("p2", status=503, started=2.0),
            model_call("p3", started=3.0),
        ]
    )
    assert found(recovered, "rollout_ended_on_failed_model_call") == []
    assert digest(recovered).ended_on_error is False


def test_ended_on_failure_for_calls_without_model_ref_and_id() -> None:
    rec = record(
        calls=[model_call(None, status=500, model_ref=None, response_id="")],
        turns=[turn("0-0", 1, [])],
    )
    assert found(rec, "rollout_ended_on_failed_model_call") == [
        {
            "check": "rollout_ended_on_failed_model_call",
            "locator": {"call_id": "0"},
            "detail": {
                "model_ref": None,
                "status": 500,
                "error_category": None,
                "observed_calls": 1,
                "successful_calls": 0,
            },
        }
    ]


def test_missing_agent_turns_when_no_turn_has_activity() -> None:
    assert found(record(turns=[]), "rollout_missing_agent_turns") == [
        {
            "check": "rollout_missing_agent_turns",
            "detail": {"reason": "no agent turn with model activity"},
        }
    ]
    # A reference alone is activity.
    assert (
        found(record(turns=[turn("0-0", 1, ["c"], answer=None)]), "rollout_missing_agent_turns")
        == []
    )


def test_hollow_turn_has_no_message_and_no_tool_call() -> None:
    rec = record(
        turns=[
            turn("0-0", 1, ["c"], answer=None),
            turn("0-0", 2, [], answer="  "),
            turn("0-0", 3, [], answer=[{"type": "function_call", "name": "f"}]),
            turn("0-0", 4, [], answer=None, reasoning={"summary": [{"text": "thinking"}]}),
            turn("0-0", 5, [], answer={"content": 7}),
        ]
    )
    assert [f["locator"] for f in found(rec, "agent_turn_hollow")] == [
        {"turn": 1},
        {"turn": 2},
        {"turn": 5},
    ]
    assert found(rec, "agent_turn_hollow")[0]["detail"] == {
        "reason": "agent turn has no message or tool calls"
    }


def test_capture_mismatch_missing_duplicated_and_gap_findings() -> None:
    rec = record(
        calls=[
            model_call(None, response_id="dup"),
            model_call(None, response_id="dup", started=2.0),
            model_call("c"),
        ],
        turns=[
            turn("0-0", 1, ["c", "ghost", {"model_ref": POLICY, "response_id": "dup"}]),
        ],
        gaps=[
            {"code": "model_call_reference_conflict", "invocation_id": "inv", "detail": "call:x"},
            {"code": "model_call_reference_conflict", "invocation_id": "inv", "detail": "call:x"},
            {"code": "model_call_reference_unmatched", "detail": "call:ghost"},
            {"code": "model_call_reference_ambiguous"},
        ],
    )
    assert found(rec, "trajectory_capture_mismatch") == [
        {
            "check": "trajectory_capture_mismatch",
            "locator": {"call_id": "ghost"},
            "detail": {"kind": "missing_captured_call"},
        },
        {
            "check": "trajectory_capture_mismatch",
            "locator": {"call_id": "dup"},
            "detail": {"kind": "duplicated_captured_call", "count": 2},
        },
        *[
            {
                "check": "trajectory_capture_mismatch",
                "locator": {"call_id": "x"},
                "detail": {
                    "kind": "conflicting_call_ownership",
                    "observation_gap": "model_call_reference_conflict",
                    "invocation_id": "inv",
                },
            }
        ]
        * 2,
        {
            "check": "trajectory_capture_mismatch",
            "locator": {"call_id": "unknown"},
            "detail": {
                "kind": "duplicated_captured_call",
                "observation_gap": "model_call_reference_ambiguous",
                "invocation_id": None,
            },
        },
    ]
    assert digest(rec).duplicated_calls == 1


def test_capture_mismatch_is_observed_through_a_gap_alone() -> None:
    rec = record(
        calls=[model_call("c")],
        turns=[turn("0-0", 1, [])],
        gaps=[{"code": "model_call_reference_unmatched", "detail": "call:z"}],
    )
    d = digest(rec)
    assert "trajectory_capture_mismatch" not in d.unobserved
    assert [f.locator for f in d.findings if f.check == "trajectory_capture_mismatch"] == [
        {"call_id": "z"}
    ]


def test_invocation_references_own_calls_but_do_not_bind_turns() -> None:
    rec = record(
        calls=[model_call("c", completion=0)],
        turns=[turn("0-0", 1, [])],
        invocations=[{"invocation_id": "inv", "model_calls": [{"model_call_id": "c"}]}],
        usage=(10, 0),
    )
    d = digest(rec)
    assert [f.check for f in d.findings] == ["model_call_zero_completion_tokens"]
    assert "rollout_token_count_mismatch" in d.unobserved
    assert d.policy_calls_observed is False


def test_reference_with_a_conflicting_model_ref_does_not_bind() -> None:
    rec = record(
        calls=[model_call("c")],
        turns=[turn("0-0", 1, [{"model_call_id": "c", "model_ref": JUDGE}])],
    )
    assert found(rec, "trajectory_capture_mismatch")[0]["detail"] == {
        "kind": "missing_captured_call"
    }


def test_token_count_mismatch_against_turn_bound_calls() -> None:
    rec = record(calls=[model_call("a"), model_call("b", started=2.0)], usage=(25, 10))
    assert found(rec, "rollout_token_count_mismatch") == [
        {
            "check": "rollout_token_count_mismatch",
            "detail": {
                "transcript_prompt": 25,
                "transcript_completion": 10,
                "capture_prompt": 20,
                "capture_completion": 10,
            },
        }
    ]
    assert found(record(usage=(10, 5)), "rollout_token_count_mismatch") == []


@pytest.mark.parametrize(
    "usage",
    [
        None,
        {"input_tokens": None, "prompt_tokens": 10, "output_tokens": 5},  # null does not fall back
        {"prompt_tokens": True, "completion_tokens": 5},  # bool is not a count
        {"prompt_tokens": -1, "completion_tokens": 5},
    ],
)
def test_token_count_mismatch_unobserved_without_transcript_usage(usage: Any) -> None:
    rec = record()
    if usage is not None:
        rec["response"] = {"usage": usage}
    assert "rollout_token_count_mismatch" in digest(rec).unobserved


def test_chat_completions_usage_names_are_read() -> None:
    rec = record()
    rec["response"] = {"usage": {"prompt_tokens": 10, "completion_tokens": 5}}
    d = digest(rec)
    assert d.verdict == "healthy"
    assert (d.transcript_prompt_tokens, d.transcript_completion_tokens) == (10, 5)


def test_token_count_mismatch_unobserved_when_the_turn_scope_is_incomplete() -> None:
    rec = record(usage=(1, 1), gaps=[{"code": "turn_model_call_scope_incomplete"}])
    assert "rollout_token_count_mismatch" in digest(rec).unobserved
    missing = record(calls=[model_call("c", prompt=None)], usage=(1, 1))
    assert "rollout_token_count_mismatch" in digest(missing).unobserved


def test_runaway_generation() -> None:
    rec = record(calls=[model_call("c", finish="length", response={"output": []})])
    assert found(rec, "model_call_runaway_generation") == [
        {
            "check": "model_call_runaway_generation",
            "locator": {"call_id": "c"},
            "detail": {"finish_reason": "length"},
        }
    ]
    chat = {"choices": [{"message": {"content": "text"}}]}
    assert (
        found(
            record(calls=[model_call("c", finish="max_tokens", response=chat)]),
            "model_call_runaway_generation",
        )
        == []
    )
    assert (
        found(
            record(calls=[model_call("c", finish="stop", response={})]),
            "model_call_runaway_generation",
        )
        == []
    )


def test_runaway_generation_unobserved_when_a_limited_response_is_missing() -> None:
    d = digest(record(calls=[model_call("c", finish="max_output_tokens", response=None)]))
    assert "model_call_runaway_generation" in d.unobserved
    assert d.verdict == "unobserved"


@pytest.mark.parametrize(
    ("response", "error"),
    [
        ({"choices": [{"message": "a string"}]}, "AttributeError"),
        ({"output_text": "", "choices": 3}, "TypeError"),
        # The choices are read even when ``output`` has content.
        ({"output": "text", "choices": [{"message": ["x"]}]}, "AttributeError"),
    ],
)
@pytest.mark.health_check_errors("model_call_runaway_generation")
def test_a_check_that_raises_is_unobserved_with_an_execution_error(
    response: Any, error: str
) -> None:
    rec = record(calls=[model_call("c", finish="length", response=response)], usage=(10, 5))
    d = digest(rec)
    assert d.unobserved == ("model_call_runaway_generation",)
    assert [f.line() for f in d.findings] == [
        {
            "check": "check_execution_error",
            "detail": {
                "reason": "check raised an unexpected exception",
                "failed_check": "model_call_runaway_generation",
                "error": error,
            },
        }
    ]
    quiet = digest(rec, ("check_execution_error",))
    assert (quiet.findings, quiet.unobserved) == ((), ("model_call_runaway_generation",))


def test_invalid_trajectory_is_unreadable_and_trajectory_checks_unobserved() -> None:
    rec = record(turns=[turn("WRONG", 1, ["c"])])
    d = digest(rec)
    assert [f.line() for f in d.findings] == [
        {
            "check": "record_unreadable",
            "detail": {"reason": "canonical trajectory is unreadable", "error": "ValidationError"},
        }
    ]
    assert len(d.unobserved) == 9 and "check_execution_error" not in d.unobserved


def test_no_trajectory_leaves_the_record_checks_evaluated() -> None:
    d = digest({"_ng_task_index": 3, "_ng_rollout_index": 0})
    assert d.verdict == "unobserved"
    assert d.unobserved == (
        "rollout_missing_agent_turns",
        "rollout_ended_on_failed_model_call",
        "agent_turn_hollow",
        "model_call_zero_completion_tokens",
        "model_call_missing_token_counts",
        "trajectory_capture_mismatch",
        "model_call_failed",
        "rollout_token_count_mismatch",
        "model_call_runaway_generation",
    )
    assert d.rollout_id == "3-0"


@pytest.mark.parametrize("code", ["model_calls_unavailable", "model_call_capture_incomplete"])
def test_incomplete_capture_makes_call_checks_unobserved(code: str) -> None:
    d = digest(record(gaps=[{"code": code}]))
    assert d.unobserved == (
        "rollout_ended_on_failed_model_call",
        "model_call_zero_completion_tokens",
        "model_call_missing_token_counts",
        "trajectory_capture_mismatch",
        "model_call_failed",
        "rollout_token_count_mismatch",
        "model_call_runaway_generation",
    )


def test_turns_unavailable_makes_turn_checks_unobserved() -> None:
    d = digest(record(gaps=[{"code": "turns_unavailable"}], usage=(10, 5)))
    assert d.unobserved == ("rollout_missing_agent_turns", "agent_turn_hollow")


def test_projection_failed_gap_hides_the_whole_trajectory() -> None:
    d = digest(record(gaps=[{"code": "trajectory_projection_failed"}]))
    assert len(d.unobserved) == 9 and d.model_calls == 0


def test_rollout_id_falls_back_from_explicit_to_trajectory_to_indexes() -> None:
    assert digest(record(_ng_rollout_id="explicit")).rollout_id == "explicit"
    assert digest(record(task=4, rollout=2)).rollout_id == "4-2"
    no_index = record()
    del no_index["_ng_task_index"], no_index["_ng_rollout_index"]
    no_index["ng_trajectory"]["rollout_id"] = "from-trajectory"
    no_index["ng_trajectory"]["turns"][0]["rollout_id"] = "from-trajectory"
    assert digest(no_index).rollout_id == "from-trajectory"
    bare = check_records([{}, {}]).digests
    assert [(d.task_index, d.rollout_id) for d in bare] == [(0, "0-0"), (1, "1-0")]
