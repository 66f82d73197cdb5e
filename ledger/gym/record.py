"""The enriched rollout record, assembled as Gym's collector attaches it (§6.1–§6.3).

Given a rollout's evidence (capture attachment with payloads, the latest observation bundle, the
collector's result) this joins the observations (§5.2), projects ``ng_trajectory`` (§6.2) with
its success/failure handling, and derives ``ng_perf`` (§6.3). Pure: same evidence, same record.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger.gym.capture_attachment import strip_payloads
from ledger.gym.join import join_model_call_observations
from ledger.gym.observations import AgentObservationBundle, ObservationGap, gap_dump
from ledger.gym.perf import build_ng_perf
from ledger.gym.result import RolloutResult, TrajectoryIdentity, trajectory_identity
from ledger.gym.trajectory import build_trajectory_record
from ledger.gym.trajectory_record import TrajectoryRecord

MULTIMODAL_HISTORY_REDACTED = "multimodal_history_redacted"
AGENT_OBSERVATION_JOIN_FAILED = "agent_observation_join_failed"
TRAJECTORY_PROJECTION_FAILED = "trajectory_projection_failed"


@dataclass(frozen=True)
class RolloutEvidence:
    """Everything the ledger holds about one rollout generation."""

    rollout_id: str
    # ``ng_model_call_capture`` as the merge builds it, calls WITH their payloads.
    capture: Mapping[str, Any] | None = None
    # The latest observation bundle, as recorded (before the join).
    observations: Mapping[str, Any] | None = None
    result: RolloutResult | None = None


def _gap_codes(document: object) -> set[str]:
    if not isinstance(document, Mapping) or not isinstance(document.get("gaps"), list):
        return set()
    return {
        gap["code"]
        for gap in document["gaps"]
        if isinstance(gap, Mapping) and isinstance(gap.get("code"), str)
    }


def payloads_redacted(evidence: RolloutEvidence) -> bool:
    """Gym keeps payloads out of the record when a producer says its history was redacted."""
    result = evidence.result
    codes = _gap_codes(evidence.observations)
    if result is not None:
        codes |= _gap_codes(result.ng_trajectory)
        codes |= {gap.code for gap in result.gaps}
    return MULTIMODAL_HISTORY_REDACTED in codes


def _capture_attachment(evidence: RolloutEvidence, *, redacted: bool) -> dict[str, Any] | None:
    if evidence.capture is None:
        return None
    # Shallow copies are enough: the pipeline replaces lists and removes call keys, but never
    # changes a nested value (and deep-copying payloads would dominate the projection's cost).
    capture = dict(evidence.capture)
    calls = capture.get("calls")
    if isinstance(calls, list):
        capture["calls"] = [
            (strip_payloads(call) if redacted else dict(call))
            if isinstance(call, Mapping)
            else call
            for call in calls
        ]
    return capture


def _append_capture_gap(capture: dict[str, Any], gap: ObservationGap) -> None:
    gaps = capture.get("gaps")
    capture["gaps"] = [*(gaps if isinstance(gaps, list) else []), gap_dump(gap)]


def _joined_observations(record: dict[str, Any], evidence: RolloutEvidence) -> None:
    if evidence.observations is None:
        return
    capture = record.get("ng_model_call_capture")
    calls = capture.get("calls") if isinstance(capture, Mapping) else None
    try:
        bundle = AgentObservationBundle.model_validate(evidence.observations)
        joined = join_model_call_observations(
            bundle, [call for call in calls or [] if isinstance(call, Mapping)]
        )
    except Exception as exc:  # kept as given, with the failure visible next to the capture
        record["ng_agent_observations"] = copy.deepcopy(dict(evidence.observations))
        if isinstance(capture, dict):
            gap = ObservationGap(code=AGENT_OBSERVATION_JOIN_FAILED, detail=type(exc).__name__)
            _append_capture_gap(capture, gap)
        return
    record["ng_agent_observations"] = joined.model_dump(mode="json")


def _attach_trajectory(
    record: dict[str, Any], identity: TrajectoryIdentity, result: RolloutResult | None
) -> None:
    """Success: the trajectory holds the payloads now. Failure: payloads stay, a gap says why."""
    capture = record.get("ng_model_call_capture")
    try:
        trajectory = build_trajectory_record(
            identity,
            producer_trajectory=record.get("ng_trajectory"),
            producer_gaps=result.gaps if result is not None else (),
            observations=record.get("ng_agent_observations"),
            capture=capture if isinstance(capture, Mapping) else None,
        )
    except Exception as exc:
        record.pop("ng_trajectory", None)
        gap = ObservationGap(code=TRAJECTORY_PROJECTION_FAILED, detail=type(exc).__name__)
        observations = record.get("ng_agent_observations")
        if isinstance(capture, dict):
            _append_capture_gap(capture, gap)
        elif isinstance(observations, dict) and isinstance(observations.get("gaps"), list):
            observations["gaps"] = [*observations["gaps"], gap.model_dump(mode="json")]
        else:
            minimal = TrajectoryRecord(
                task_id=identity.task_id, rollout_id=identity.rollout_id, gaps=[gap]
            )
            record["ng_trajectory"] = minimal.model_dump(mode="json")
        return
    record["ng_trajectory"] = trajectory.model_dump(mode="json")
    if isinstance(capture, dict) and isinstance(capture.get("calls"), list):
        capture["calls"] = [
            strip_payloads(call) if isinstance(call, Mapping) else call for call in capture["calls"]
        ]


def enrich_record(evidence: RolloutEvidence) -> dict[str, Any]:
    """The record a reader gets: identity, capture, joined observations, trajectory, perf."""
    result = evidence.result
    record: dict[str, Any] = {}
    if result is not None:
        record.update(result.identity_fields())
        if result.resolved is not None:
            record["resolved"] = result.resolved
        if result.response is not None:
            # Gym's row carries the agent's response; health reads its ``usage``.
            record["response"] = copy.deepcopy(result.response)
    capture = _capture_attachment(evidence, redacted=payloads_redacted(evidence))
    if capture is not None:
        record["ng_model_call_capture"] = capture
    _joined_observations(record, evidence)
    if result is not None and result.ng_trajectory is not None:
        record["ng_trajectory"] = copy.deepcopy(result.ng_trajectory)
    if any(
        key in record for key in ("ng_model_call_capture", "ng_agent_observations", "ng_trajectory")
    ):
        _attach_trajectory(record, trajectory_identity(result, evidence.rollout_id), result)
    perf = build_ng_perf(
        record.get("ng_trajectory"), result.latency_ms if result is not None else None
    )
    if perf is not None:
        record["ng_perf"] = perf
    return record
