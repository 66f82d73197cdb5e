"""The check ids, in Gym's registry order, and the ignored-checks option."""

from __future__ import annotations

from collections.abc import Sequence

CHECK_EXECUTION_ERROR = "check_execution_error"
RECORD_UNREADABLE = "record_unreadable"
ROLLOUT_DUPLICATE_IDENTITY = "rollout_duplicate_identity"
ROLLOUT_MISSING_AGENT_TURNS = "rollout_missing_agent_turns"
ROLLOUT_ENDED_ON_FAILED_MODEL_CALL = "rollout_ended_on_failed_model_call"
AGENT_TURN_HOLLOW = "agent_turn_hollow"
MODEL_CALL_ZERO_COMPLETION_TOKENS = "model_call_zero_completion_tokens"
MODEL_CALL_MISSING_TOKEN_COUNTS = "model_call_missing_token_counts"
TRAJECTORY_CAPTURE_MISMATCH = "trajectory_capture_mismatch"
MODEL_CALL_FAILED = "model_call_failed"
ROLLOUT_TOKEN_COUNT_MISMATCH = "rollout_token_count_mismatch"
MODEL_CALL_RUNAWAY_GENERATION = "model_call_runaway_generation"
TASK_CONSISTENTLY_UNHEALTHY = "task_consistently_unhealthy"
TASK_NO_SUCCESSFUL_MODEL_CALLS = "task_no_successful_model_calls"

ROLLOUT_CHECKS: tuple[str, ...] = (
    CHECK_EXECUTION_ERROR,
    RECORD_UNREADABLE,
    ROLLOUT_DUPLICATE_IDENTITY,
    ROLLOUT_MISSING_AGENT_TURNS,
    ROLLOUT_ENDED_ON_FAILED_MODEL_CALL,
    AGENT_TURN_HOLLOW,
    MODEL_CALL_ZERO_COMPLETION_TOKENS,
    MODEL_CALL_MISSING_TOKEN_COUNTS,
    TRAJECTORY_CAPTURE_MISMATCH,
    MODEL_CALL_FAILED,
    ROLLOUT_TOKEN_COUNT_MISMATCH,
    MODEL_CALL_RUNAWAY_GENERATION,
)
TASK_CHECKS: tuple[str, ...] = (TASK_CONSISTENTLY_UNHEALTHY, TASK_NO_SUCCESSFUL_MODEL_CALLS)
ALL_CHECKS: tuple[str, ...] = ROLLOUT_CHECKS + TASK_CHECKS


class UnknownCheck(ValueError):
    """An ignored-check id that is not one of the fourteen."""


def normalize_ignored_checks(checks: Sequence[str] | str | None) -> tuple[str, ...]:
    """Gym's rule: a comma string or a list; stripped, empties dropped, first copy kept."""
    if checks is None:
        return ()
    items = checks.split(",") if isinstance(checks, str) else list(checks)
    kept: list[str] = []
    for item in items:
        name = item.strip()
        if name and name not in kept:
            kept.append(name)
    unknown = sorted(name for name in kept if name not in ALL_CHECKS)
    if unknown:
        raise UnknownCheck(f"Unknown rollout health check(s): {', '.join(unknown)}")
    return tuple(kept)
