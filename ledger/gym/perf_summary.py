"""Gym's ``perf_summary`` block (``compute_perf_summary``) over a set of ``ng_perf`` documents.

A key is left out, never null, when no rollout reported its input. Percentiles interpolate
linearly between the sorted values, computed as numpy does (the lerp taken from the upper
neighbour when the weight is at least one half), so the floats match Gym's to the last bit.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

TOKEN_FIELDS = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")
Number = int | float


class UnsummarisableValue(ValueError):
    """A boolean where a number is expected (Gym crashes on it; the ledger says so)."""


def _numbers(documents: Sequence[Mapping[str, Any]], key: str) -> list[Number]:
    return [d[key] for d in documents if isinstance(d.get(key), int | float)]


def percentile(values: Sequence[Number], percent: int) -> float:
    """Linear interpolation at ``percent``/100 (numpy's default method)."""
    if any(isinstance(v, bool) for v in values):
        raise UnsummarisableValue("a boolean cannot be summarised as a percentile")
    ordered = sorted(values)
    position = (len(ordered) - 1) * (percent / 100)
    below = math.floor(position)
    if below >= len(ordered) - 1:
        return float(ordered[-1])
    weight = position - below
    low, high = ordered[below], ordered[below + 1]
    if any(isinstance(v, float) for v in ordered):
        low, high = float(low), float(high)
    step = high - low
    return float(high - step * (1 - weight) if weight >= 0.5 else low + step * weight)


def perf_summary(
    documents: Sequence[Mapping[str, Any]], total_rollouts: int
) -> dict[str, Any] | None:
    """The block for ``documents`` (one ``ng_perf`` per rollout that has one) among
    ``total_rollouts`` rollouts; None when there are no rollouts or no documents."""
    if total_rollouts <= 0 or not documents:
        return None
    token_covered = sum(
        1
        for d in documents
        if isinstance(d.get("token_observability_coverage"), int | float)
        and d["token_observability_coverage"] > 0
    )
    summary: dict[str, Any] = {
        "overall_observability_coverage": len(documents) / total_rollouts,
        "token_observability_coverage": token_covered / total_rollouts,
    }
    for name in TOKEN_FIELDS:
        values = _numbers(documents, name)
        if values:
            summary[f"mean_{name}"] = statistics.fmean(values)
            summary[f"median_{name}"] = statistics.median(values)
            summary[f"total_{name}"] = sum(values)
    turns = _numbers(documents, "num_turns")
    if turns:
        summary["mean_num_turns"] = statistics.fmean(turns)
        summary["median_num_turns"] = statistics.median(turns)
        summary["std_num_turns"] = statistics.pstdev(turns)
        summary["min_num_turns"] = min(turns)
        summary["p90_num_turns"] = percentile(turns, 90)
        summary["max_num_turns"] = max(turns)
    per_turn = [
        d["completion_tokens"] / d["num_turns"]
        for d in documents
        if isinstance(d.get("completion_tokens"), int | float)
        and isinstance(d.get("num_turns"), int | float)
        and d["num_turns"] > 0
    ]
    if per_turn:
        summary["mean_tokens_per_turn"] = statistics.fmean(per_turn)
        summary["median_tokens_per_turn"] = statistics.median(per_turn)
    latency = _numbers(documents, "total_latency_ms")
    if latency:
        summary["total_latency_p50_ms"] = percentile(latency, 50)
        summary["total_latency_p90_ms"] = percentile(latency, 90)
        summary["total_latency_p99_ms"] = percentile(latency, 99)
        summary["total_latency_mean_ms"] = statistics.fmean(latency)
    return summary
