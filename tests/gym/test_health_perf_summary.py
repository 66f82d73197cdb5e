"""Gym's perf_summary block: keys absent (not null) without input; linear percentiles."""

from __future__ import annotations

import pytest

from ledger.gym.perf_summary import UnsummarisableValue, percentile, perf_summary


def test_none_without_rollouts_or_documents() -> None:
    assert perf_summary([], 3) is None
    assert perf_summary([{"num_turns": 1}], 0) is None


def test_the_tiny_example() -> None:
    documents = [
        {
            "num_turns": 1,
            "token_observability_coverage": 1.0,
            "completion_tokens": 5,
            "total_latency_ms": 100.0,
        },
        {
            "num_turns": 3,
            "token_observability_coverage": 1.0,
            "completion_tokens": 9,
            "total_latency_ms": 300.0,
        },
    ]
    summary = perf_summary(documents, total_rollouts=3)
    assert repr(summary) == repr(
        {
            "overall_observability_coverage": 2 / 3,
            "token_observability_coverage": 2 / 3,
            "mean_completion_tokens": 7.0,
            "median_completion_tokens": 7.0,
            "total_completion_tokens": 14,
            "mean_num_turns": 2.0,
            "median_num_turns": 2.0,
            "std_num_turns": 1.0,
            "min_num_turns": 1,
            "p90_num_turns": 2.8,
            "max_num_turns": 3,
            "mean_tokens_per_turn": 4.0,
            "median_tokens_per_turn": 4.0,
            "total_latency_p50_ms": 200.0,
            "total_latency_p90_ms": 280.0,
            "total_latency_p99_ms": 298.0,
            "total_latency_mean_ms": 200.0,
        }
    )


def test_keys_are_absent_without_input_and_coverage_may_be_zero() -> None:
    summary = perf_summary([{"token_observability_coverage": 0.0, "num_tool_calls": 2}], 4)
    assert summary == {"overall_observability_coverage": 0.25, "token_observability_coverage": 0.0}


def test_odd_median_keeps_the_int_and_a_single_percentile_is_a_float() -> None:
    summary = perf_summary([{"num_turns": 2, "prompt_tokens": 7, "total_latency_ms": 5}], 1)
    assert summary is not None
    assert summary["median_prompt_tokens"] == 7 and type(summary["median_prompt_tokens"]) is int
    assert type(summary["p90_num_turns"]) is float and summary["total_latency_p99_ms"] == 5.0
    assert "mean_tokens_per_turn" not in summary  # no completion tokens


def test_tokens_per_turn_skips_zero_turns() -> None:
    summary = perf_summary(
        [{"num_turns": 0, "completion_tokens": 9}, {"num_turns": 2, "completion_tokens": 9}], 2
    )
    assert summary is not None and summary["mean_tokens_per_turn"] == 4.5


@pytest.mark.parametrize(
    ("values", "percent", "expected"),
    [
        ([1, 2, 3, 4], 50, 2.5),
        ([10, 20, 30, 40, 50], 90, 46.0),
        ([3, 1, 2], 99, 2.98),
        ([0.1, 0.2], 90, 0.19),
    ],
)
def test_percentile_is_linear(values: list[float], percent: int, expected: float) -> None:
    assert percentile(values, percent) == pytest.approx(expected, rel=0, abs=1e-12)


def test_upper_half_interpolates_from_the_upper_neighbour() -> None:
    # numpy's lerp: b - (b - a) * (1 - t) for t >= 0.5, bit for bit.
    assert percentile([0.1, 0.7], 90) == 0.7 - (0.7 - 0.1) * (1 - 0.9)
    assert percentile([0.1, 0.7], 10) == 0.1 + (0.7 - 0.1) * 0.1


def test_a_boolean_is_refused() -> None:
    with pytest.raises(UnsummarisableValue):
        perf_summary([{"num_turns": True}], 1)
