"""Token usage normalisation (Gym contract §2.8), identical for every dialect.

The rules key on field names, not on the exchange's dialect: an OpenAI-style usage never carries
``cache_read_input_tokens``, so the Anthropic fold only ever fires on Anthropic usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# A count no database column holds (beyond a signed 64-bit integer) is no real count either.
MAX_COUNT = 2**63 - 1


def valid_count(value: object) -> int | None:
    """A count is an int >= 0; bools, floats, strings and negatives count as absent, and so do
    counts beyond the signed 64-bit range."""
    # bool is a subclass of int, so it has to be refused explicitly.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        return None
    return value


def _first_valid(mapping: object, *keys: str) -> int | None:
    if not isinstance(mapping, Mapping):
        return None
    for key in keys:
        count = valid_count(mapping.get(key))
        if count is not None:
            return count
    return None


@dataclass(frozen=True)
class TokenStats:
    """Normalised token usage of one model call; None always means unknown, never zero."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_reasoning: int | None = None
    tokens_total: int | None = None
    cached_tokens: int | None = None
    cache_hit: bool | None = None
    cache_creation_tokens: int | None = None


def extract_token_stats(response: object) -> TokenStats:
    """Normalise ``response.usage``; a missing or non-object response/usage gives all-None."""
    usage: Any = response.get("usage") if isinstance(response, Mapping) else None
    if not isinstance(usage, Mapping):
        return TokenStats()

    tokens_in = _first_valid(usage, "input_tokens", "prompt_tokens")
    tokens_out = _first_valid(usage, "output_tokens", "completion_tokens")

    # Anthropic reports cache reads/creations beside input_tokens (not inside it), so they are
    # folded in. OpenAI/Responses cached counts are a subset of the prompt and never folded.
    cache_read = valid_count(usage.get("cache_read_input_tokens"))
    cache_creation = valid_count(usage.get("cache_creation_input_tokens"))
    if cache_read is not None or cache_creation is not None:
        cache_total = (cache_read or 0) + (cache_creation or 0)
        if tokens_in is not None or cache_total > 0:
            tokens_in = valid_count((tokens_in or 0) + cache_total)

    tokens_total = valid_count(usage.get("total_tokens"))
    if tokens_total is None and tokens_in is not None and tokens_out is not None:
        tokens_total = valid_count(tokens_in + tokens_out)

    tokens_reasoning = _first_valid(usage.get("output_tokens_details"), "reasoning_tokens")
    if tokens_reasoning is None:
        tokens_reasoning = _first_valid(usage.get("completion_tokens_details"), "reasoning_tokens")
    if tokens_reasoning is None:
        tokens_reasoning = valid_count(usage.get("reasoning_output_tokens"))

    cached = _first_valid(
        usage.get("prompt_tokens_details"), "cached_tokens", "cached_input_tokens"
    )
    if cached is None:
        cached = _first_valid(
            usage.get("input_tokens_details"), "cached_tokens", "cached_input_tokens"
        )
    if cached is None:
        cached = cache_read
    if cached is None:
        cached = valid_count(usage.get("cached_input_tokens"))

    return TokenStats(
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        tokens_reasoning=tokens_reasoning,
        tokens_total=tokens_total,
        cached_tokens=cached,
        cache_hit=None if cached is None else cached > 0,
        cache_creation_tokens=cache_creation,
    )
