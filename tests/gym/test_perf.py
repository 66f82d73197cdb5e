"""§6.3 ``ng_perf``: turn-count fallback, owned calls, tool counts, coverage, tokens, latency."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.gym.perf import build_ng_perf
from tests.support.observations import model_ref

POLICY = model_ref("policy")


def call(model_call_id: str | None = None, **tokens: int) -> dict[str, Any]:
    return {"model_call_id": model_call_id, "token_stats": tokens}


def invocation(invocation_id: str, *refs: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "agent_invocation", "invocation_id": invocation_id, "model_calls": list(refs)}


def turn(invocation_id: str, turn_no: int) -> dict[str, Any]:
    return {
        "invocation_id": invocation_id,
        "task_id": "t",
        "rollout_id": "0-0",
        "turn_no": turn_no,
        "timestamp": float(turn_no),
        "step_count": 1,
    }


def tool(invocation_id: str, tool_call_id: str) -> dict[str, Any]:
    return {"kind": "tool_call", "invocation_id": invocation_id, "tool_call_id": tool_call_id}


def trajectory(**fields: Any) -> dict[str, Any]:
    return {"schema_version": "1.0", "task_id": "t", "rollout_id": "0-0", **fields}


@pytest.mark.parametrize(
    "document",
    [
        None,
        [],
        "x",
        trajectory(),
        trajectory(invocations=[]),
        {"task_id": "t"},
        trajectory(turns=[{"turn_no": 0}]),
    ],
    ids=[
        "none",
        "list",
        "string",
        "no-invocations",
        "empty-invocations",
        "invalid",
        "invalid-turn",
    ],
)
def test_absent_without_a_valid_invocation(document: object) -> None:
    assert build_ng_perf(document, 100) is None


def test_one_invocation_without_evidence_counts_one_turn() -> None:
    perf = build_ng_perf(trajectory(invocations=[invocation("root")]))
    assert perf == {"num_turns": 1, "num_tool_calls": 0, "token_observability_coverage": 0.0}


def test_turn_count_falls_back_from_turns_to_owned_calls_to_one() -> None:
    document = trajectory(
        invocations=[
            invocation("with-turns", {"model_call_id": "a"}),
            invocation("with-calls", {"model_call_id": "b"}, {"model_call_id": "c"}),
            invocation("bare"),
        ],
        turns=[turn("with-turns", 1), turn("with-turns", 2), turn("with-turns", 3)],
        model_calls=[call("a"), call("b"), call("c")],
    )
    perf = build_ng_perf(document)
    assert perf is not None
    assert perf["num_turns"] == 3 + 2 + 1
    assert perf["token_observability_coverage"] == 3 / 6


def test_each_physical_call_is_credited_once_to_the_first_invocation() -> None:
    document = trajectory(
        invocations=[
            invocation("root", {"model_call_id": "a"}, {"model_call_id": "a"}),
            invocation("sub", {"model_call_id": "a"}),
        ],
        model_calls=[call("a", prompt_tokens=10)],
    )
    perf = build_ng_perf(document)
    # root owns "a" (1 turn); sub owns nothing (1 turn by the fallback).
    assert perf == {
        "num_turns": 2,
        "num_tool_calls": 0,
        "token_observability_coverage": 0.5,
        "prompt_tokens": 10,
    }


def test_only_unique_exact_matches_are_owned() -> None:
    other = model_ref("judge")
    document = trajectory(
        invocations=[
            invocation(
                "root",
                {"model_call_id": "x", "model_ref": other},  # filtered out by its model_ref
                {"model_ref": POLICY, "response_id": "r1"},  # pair: unique
                {"model_ref": POLICY, "response_id": "twice"},  # pair: ambiguous
            )
        ],
        model_calls=[
            {
                "model_call_id": "x",
                "response_metadata": {"model_ref": POLICY},
                "token_stats": {"prompt_tokens": 1},
            },
            {
                "response_metadata": {"model_ref": POLICY, "response_id": "r1"},
                "token_stats": {"prompt_tokens": 2},
            },
            {
                "response_metadata": {"model_ref": POLICY, "response_id": "twice"},
                "token_stats": {"prompt_tokens": 4},
            },
            {
                "response_metadata": {"model_ref": POLICY, "response_id": "twice"},
                "token_stats": {"prompt_tokens": 8},
            },
        ],
    )
    perf = build_ng_perf(document)
    assert perf == {
        "num_turns": 1,
        "num_tool_calls": 0,
        "token_observability_coverage": 1.0,
        "prompt_tokens": 2,
    }


def test_tool_calls_of_unknown_invocations_are_not_counted() -> None:
    document = trajectory(
        invocations=[invocation("root"), invocation("sub")],
        tool_calls=[
            tool("root", "t1"),
            tool("sub", "t2"),
            tool("orphan", "t3"),
            tool("root", "t4"),
        ],
    )
    perf = build_ng_perf(document)
    assert perf is not None
    assert perf["num_tool_calls"] == 3


def test_coverage_is_capped_at_one() -> None:
    document = trajectory(
        invocations=[invocation("root", {"model_call_id": "a"}, {"model_call_id": "b"})],
        turns=[turn("root", 1)],
        model_calls=[call("a"), call("b")],
    )
    perf = build_ng_perf(document)
    assert perf is not None
    assert perf["num_turns"] == 1
    assert perf["token_observability_coverage"] == 1.0
    assert isinstance(perf["token_observability_coverage"], float)


def test_token_sums_include_only_observed_values_of_owned_calls() -> None:
    document = trajectory(
        invocations=[invocation("root", {"model_call_id": "a"}, {"model_call_id": "b"})],
        model_calls=[
            call("a", prompt_tokens=10, completion_tokens=0, cached_tokens=4, total_tokens=99),
            call("b", prompt_tokens=5, reasoning_tokens=7),
            call("unowned", prompt_tokens=1000, completion_tokens=1000),
        ],
    )
    perf = build_ng_perf(document, 1234.5)
    assert list((perf or {}).items()) == [
        ("num_turns", 2),
        ("num_tool_calls", 0),
        ("token_observability_coverage", 1.0),
        ("prompt_tokens", 15),
        ("cached_prompt_tokens", 4),
        ("completion_tokens", 0),
        ("reasoning_tokens", 7),
        ("total_latency_ms", 1234.5),
    ]


def test_no_token_fields_when_no_owned_call_reports_them() -> None:
    document = trajectory(
        invocations=[invocation("root", {"model_call_id": "a"})], model_calls=[call("a")]
    )
    assert build_ng_perf(document) == {
        "num_turns": 1,
        "num_tool_calls": 0,
        "token_observability_coverage": 1.0,
    }


@pytest.mark.parametrize(
    ("latency", "expected"),
    [(910, 910), (0, 0), (12.5, 12.5), (None, None), ("910", None), (True, None)],
)
def test_total_latency_is_the_measured_latency_when_it_is_a_number(
    latency: object, expected: object
) -> None:
    perf = build_ng_perf(trajectory(invocations=[invocation("root")]), latency)
    assert perf is not None
    assert perf.get("total_latency_ms") == expected
    assert ("total_latency_ms" in perf) is (expected is not None)
