"""``ng_perf`` (§6.3, Gym's ``_build_ng_perf``): a rollout's turns, tools, tokens and latency.

Computed from a validated ``ng_trajectory`` only. Each physical model call is credited once, to
the first invocation whose reference resolves to it uniquely.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from pydantic import ValidationError

from ledger.gym.observations import ModelCallRef
from ledger.gym.trajectory_record import TrajectoryModelCall, TrajectoryRecord

log = logging.getLogger(__name__)

# (ng_perf key, TrajectoryTokenStats field), in the order the keys appear in ng_perf.
TOKEN_FIELDS = (
    ("prompt_tokens", "prompt_tokens"),
    ("cached_prompt_tokens", "cached_tokens"),
    ("completion_tokens", "completion_tokens"),
    ("reasoning_tokens", "reasoning_tokens"),
)


class _CallResolver:
    def __init__(self, calls: list[TrajectoryModelCall]) -> None:
        self.calls = calls
        self.by_id: dict[str, list[int]] = defaultdict(list)
        self.by_response: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        for position, call in enumerate(calls):
            metadata = call.response_metadata
            if call.model_call_id:
                self.by_id[call.model_call_id].append(position)
            if metadata.model_ref is not None and metadata.response_id:
                key = (*metadata.model_ref.key, metadata.response_id)
                self.by_response[key].append(position)

    def resolve(self, ref: ModelCallRef) -> int | None:
        """The position of the one call ``ref`` names, or None when not exactly one."""
        if ref.model_call_id:
            candidates = [
                position
                for position in self.by_id.get(ref.model_call_id, [])
                if self._consistent(ref, self.calls[position])
            ]
        elif ref.model_ref is not None and ref.response_id:
            candidates = self.by_response.get((*ref.model_ref.key, ref.response_id), [])
        else:
            candidates = []
        return candidates[0] if len(candidates) == 1 else None

    @staticmethod
    def _consistent(ref: ModelCallRef, call: TrajectoryModelCall) -> bool:
        metadata = call.response_metadata
        if ref.model_ref is not None and (
            metadata.model_ref is None or metadata.model_ref.key != ref.model_ref.key
        ):
            return False
        return ref.response_id is None or ref.response_id == metadata.response_id


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def build_ng_perf(trajectory: object, measured_latency_ms: object = None) -> dict[str, Any] | None:
    """The ``ng_perf`` object, or None when it must be absent (no valid invocation)."""
    if not isinstance(trajectory, dict):
        return None
    try:
        record = TrajectoryRecord.model_validate(trajectory)
    except ValidationError:
        return None
    if not record.invocations:
        return None
    try:
        return _perf(record, measured_latency_ms)
    except Exception:  # Gym's rule: any failure leaves ng_perf absent, never the record broken.
        log.exception("ng_perf could not be computed for rollout %s", record.rollout_id)
        return None


def _perf(record: TrajectoryRecord, measured_latency_ms: object) -> dict[str, Any]:
    resolver = _CallResolver(record.model_calls)
    owned: list[int] = []
    seen: set[int] = set()
    credited: dict[str, int] = defaultdict(int)
    for invocation in record.invocations:
        for ref in invocation.model_calls:
            position = resolver.resolve(ref)
            if position is not None and position not in seen:
                seen.add(position)
                owned.append(position)
                credited[invocation.invocation_id] += 1
    turns_by_invocation: dict[str, int] = defaultdict(int)
    for turn in record.turns:
        turns_by_invocation[turn.invocation_id] += 1
    num_turns = sum(
        turns_by_invocation[invocation.invocation_id] or credited[invocation.invocation_id] or 1
        for invocation in record.invocations
    )
    invocation_ids = {invocation.invocation_id for invocation in record.invocations}
    perf: dict[str, Any] = {
        "num_turns": num_turns,
        "num_tool_calls": sum(
            1 for tool in record.tool_calls if tool.invocation_id in invocation_ids
        ),
        "token_observability_coverage": min(1.0, len(owned) / num_turns),
    }
    for key, field in TOKEN_FIELDS:
        values = [getattr(record.model_calls[position].token_stats, field) for position in owned]
        observed = [value for value in values if value is not None]
        if observed:
            perf[key] = sum(observed)
    if _is_number(measured_latency_ms):
        perf["total_latency_ms"] = measured_latency_ms
    return perf
