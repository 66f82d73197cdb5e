"""Usage normalisation (§2.8), rule by rule, with real usage objects of each dialect."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.gym.usage import TokenStats, extract_token_stats, valid_count


def stats(usage: Any) -> TokenStats:
    return extract_token_stats({"usage": usage})


# --- what counts as a count --------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, 10_000_000])
def test_non_negative_ints_are_counts(value: int) -> None:
    assert valid_count(value) == value


@pytest.mark.parametrize("value", [True, False, 1.0, 2.5, "3", -1, None, [1], {"n": 1}])
def test_everything_else_is_absent(value: object) -> None:
    assert valid_count(value) is None


@pytest.mark.parametrize("bad", [True, 12.0, "12", -12])
def test_invalid_counts_are_treated_as_absent_and_fall_back(bad: object) -> None:
    result = stats({"input_tokens": bad, "prompt_tokens": 7, "output_tokens": bad})
    assert result.tokens_in == 7
    assert result.tokens_out is None
    assert result.tokens_total is None


# --- non-object usage ----------------------------------------------------------------------

ALL_NULL = TokenStats(
    tokens_in=None,
    tokens_out=None,
    tokens_reasoning=None,
    tokens_total=None,
    cached_tokens=None,
    cache_hit=None,
    cache_creation_tokens=None,
)


@pytest.mark.parametrize("usage", [None, [], [{"input_tokens": 3}], "input_tokens=3", 3, True])
def test_non_object_usage_gives_all_null(usage: object) -> None:
    assert stats(usage) == ALL_NULL


@pytest.mark.parametrize("response", [None, [], "text", {"id": "x"}])
def test_missing_response_or_usage_gives_all_null(response: object) -> None:
    assert extract_token_stats(response) == ALL_NULL


# --- per dialect ---------------------------------------------------------------------------


def test_responses_usage() -> None:
    usage = {
        "input_tokens": 94,
        "input_tokens_details": {"cached_tokens": 64},
        "output_tokens": 28,
        "output_tokens_details": {"reasoning_tokens": 12},
        "total_tokens": 122,
    }
    assert stats(usage) == TokenStats(
        tokens_in=94,  # the cached 64 are a subset of the 94, never added
        tokens_out=28,
        tokens_reasoning=12,
        tokens_total=122,
        cached_tokens=64,
        cache_hit=True,
        cache_creation_tokens=None,
    )


def test_chat_completions_usage() -> None:
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    assert stats(usage) == TokenStats(
        tokens_in=120,
        tokens_out=30,
        tokens_reasoning=5,
        tokens_total=150,
        cached_tokens=0,
        cache_hit=False,
        cache_creation_tokens=None,
    )


def test_anthropic_usage_folds_cache_into_tokens_in() -> None:
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 200,
        "cache_creation_input_tokens": 50,
        "output_tokens": 40,
    }
    assert stats(usage) == TokenStats(
        tokens_in=260,
        tokens_out=40,
        tokens_reasoning=None,  # Anthropic reports no reasoning count: unknown, never 0
        tokens_total=300,
        cached_tokens=200,
        cache_hit=True,
        cache_creation_tokens=50,
    )


# --- tokens_in / tokens_out fallbacks ------------------------------------------------------


def test_input_tokens_win_over_prompt_tokens() -> None:
    assert stats({"input_tokens": 5, "prompt_tokens": 9}).tokens_in == 5


def test_prompt_tokens_when_input_tokens_missing() -> None:
    assert stats({"prompt_tokens": 9}).tokens_in == 9


def test_output_tokens_win_over_completion_tokens() -> None:
    assert stats({"output_tokens": 3, "completion_tokens": 8}).tokens_out == 3


def test_completion_tokens_when_output_tokens_missing() -> None:
    assert stats({"completion_tokens": 8}).tokens_out == 8


def test_zero_is_a_known_value_not_a_missing_one() -> None:
    result = stats({"input_tokens": 0, "prompt_tokens": 9, "output_tokens": 0})
    assert result.tokens_in == 0
    assert result.tokens_out == 0
    assert result.tokens_total == 0


# --- Anthropic cache fold ------------------------------------------------------------------


def test_fold_with_only_cache_read() -> None:
    result = stats({"input_tokens": 4, "cache_read_input_tokens": 96})
    assert result.tokens_in == 100
    assert result.cache_creation_tokens is None


def test_fold_with_only_cache_creation() -> None:
    result = stats({"input_tokens": 4, "cache_creation_input_tokens": 6})
    assert result.tokens_in == 10
    assert result.cache_creation_tokens == 6
    assert result.cached_tokens is None
    assert result.cache_hit is None


def test_fold_when_tokens_in_unknown_but_cache_positive() -> None:
    assert stats({"cache_read_input_tokens": 30, "cache_creation_input_tokens": 2}).tokens_in == 32


def test_tokens_in_unknown_and_cache_total_zero_stays_null() -> None:
    result = stats({"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})
    assert result.tokens_in is None
    assert result.cached_tokens == 0
    assert result.cache_hit is False
    assert result.cache_creation_tokens == 0


def test_tokens_in_known_and_cache_total_zero_keeps_tokens_in() -> None:
    assert stats({"input_tokens": 7, "cache_read_input_tokens": 0}).tokens_in == 7


def test_invalid_cache_counts_are_not_folded() -> None:
    result = stats(
        {"input_tokens": 7, "cache_read_input_tokens": "5", "cache_creation_input_tokens": -2}
    )
    assert result.tokens_in == 7
    assert result.cached_tokens is None
    assert result.cache_creation_tokens is None


def test_one_invalid_cache_count_folds_only_the_valid_one() -> None:
    result = stats(
        {"input_tokens": 7, "cache_read_input_tokens": 3.0, "cache_creation_input_tokens": 5}
    )
    assert result.tokens_in == 12


def test_fold_happens_before_the_total_fallback() -> None:
    usage = {"input_tokens": 1, "cache_read_input_tokens": 9, "output_tokens": 2}
    assert stats(usage).tokens_total == 12


@pytest.mark.parametrize("details_key", ["prompt_tokens_details", "input_tokens_details"])
def test_openai_cached_counts_are_never_folded(details_key: str) -> None:
    usage = {
        "input_tokens": 50,
        details_key: {"cached_tokens": 40},
        "cached_input_tokens": 40,
    }
    result = stats(usage)
    assert result.tokens_in == 50
    assert result.cached_tokens == 40


# --- total -------------------------------------------------------------------------------


def test_reported_total_wins_even_when_it_disagrees() -> None:
    assert stats({"input_tokens": 1, "output_tokens": 1, "total_tokens": 99}).tokens_total == 99


def test_total_falls_back_to_in_plus_out() -> None:
    assert stats({"prompt_tokens": 11, "completion_tokens": 4}).tokens_total == 15


@pytest.mark.parametrize(
    "usage",
    [{"input_tokens": 11}, {"output_tokens": 4}, {"input_tokens": 11, "output_tokens": "4"}],
)
def test_total_is_null_when_either_side_unknown(usage: dict[str, Any]) -> None:
    assert stats(usage).tokens_total is None


def test_invalid_reported_total_falls_back() -> None:
    assert stats({"input_tokens": 2, "output_tokens": 3, "total_tokens": 5.0}).tokens_total == 5


# --- reasoning tokens ----------------------------------------------------------------------


def test_reasoning_prefers_output_tokens_details() -> None:
    usage = {
        "output_tokens_details": {"reasoning_tokens": 1},
        "completion_tokens_details": {"reasoning_tokens": 2},
        "reasoning_output_tokens": 3,
    }
    assert stats(usage).tokens_reasoning == 1


def test_reasoning_then_completion_tokens_details() -> None:
    usage = {
        "output_tokens_details": {"reasoning_tokens": "1"},
        "completion_tokens_details": {"reasoning_tokens": 2},
        "reasoning_output_tokens": 3,
    }
    assert stats(usage).tokens_reasoning == 2


def test_reasoning_then_top_level_reasoning_output_tokens() -> None:
    usage = {
        "output_tokens_details": None,
        "completion_tokens_details": {"reasoning_tokens": None},
        "reasoning_output_tokens": 3,
    }
    assert stats(usage).tokens_reasoning == 3


def test_reasoning_zero_is_kept() -> None:
    assert stats({"completion_tokens_details": {"reasoning_tokens": 0}}).tokens_reasoning == 0


def test_reasoning_null_when_nothing_valid() -> None:
    usage = {"output_tokens_details": {"reasoning_tokens": -1}, "reasoning_output_tokens": True}
    assert stats(usage).tokens_reasoning is None


def test_reasoning_details_that_are_not_objects_are_ignored() -> None:
    usage = {"output_tokens_details": [{"reasoning_tokens": 4}], "reasoning_output_tokens": 6}
    assert stats(usage).tokens_reasoning == 6


# --- cached tokens search order ------------------------------------------------------------

CACHED_ORDER: list[tuple[dict[str, Any], int]] = [
    (
        {
            "prompt_tokens_details": {"cached_tokens": 1, "cached_input_tokens": 2},
            "input_tokens_details": {"cached_tokens": 3},
            "cache_read_input_tokens": 4,
            "cached_input_tokens": 5,
        },
        1,
    ),
    (
        {
            "prompt_tokens_details": {"cached_tokens": "x", "cached_input_tokens": 2},
            "input_tokens_details": {"cached_tokens": 3},
            "cache_read_input_tokens": 4,
            "cached_input_tokens": 5,
        },
        2,
    ),
    (
        {
            "prompt_tokens_details": {},
            "input_tokens_details": {"cached_tokens": 3, "cached_input_tokens": 33},
            "cache_read_input_tokens": 4,
            "cached_input_tokens": 5,
        },
        3,
    ),
    (
        {
            "input_tokens_details": {"cached_tokens": None, "cached_input_tokens": 33},
            "cache_read_input_tokens": 4,
            "cached_input_tokens": 5,
        },
        33,
    ),
    ({"input_tokens_details": "n/a", "cache_read_input_tokens": 4, "cached_input_tokens": 5}, 4),
    ({"cache_read_input_tokens": -4, "cached_input_tokens": 5}, 5),
]


@pytest.mark.parametrize(("usage", "expected"), CACHED_ORDER)
def test_cached_tokens_search_order(usage: dict[str, Any], expected: int) -> None:
    assert stats(usage).cached_tokens == expected


def test_cached_tokens_null_when_nothing_valid() -> None:
    result = stats({"prompt_tokens_details": {"cached_tokens": 1.5}, "cached_input_tokens": False})
    assert result.cached_tokens is None
    assert result.cache_hit is None


# --- cache hit and creation ----------------------------------------------------------------


@pytest.mark.parametrize(("cached", "hit"), [(0, False), (1, True), (500, True)])
def test_cache_hit_is_cached_greater_than_zero(cached: int, hit: bool) -> None:
    assert stats({"prompt_tokens_details": {"cached_tokens": cached}}).cache_hit is hit


def test_cache_hit_null_when_cached_unknown() -> None:
    assert stats({"input_tokens": 3}).cache_hit is None


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (12, 12), ("12", None), (-1, None)])
def test_cache_creation_tokens(value: object, expected: int | None) -> None:
    assert stats({"cache_creation_input_tokens": value}).cache_creation_tokens == expected
