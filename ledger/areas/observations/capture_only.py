"""The enriched record of a rollout that so far has only captures, kept as a template.

Until an observation bundle or a result arrives (usually once, at the end of a rollout), a
rollout's record is a function of its calls in which every call contributes two independent
pieces: its entry in ``ng_model_call_capture.calls`` (the payload-free record dump the capture
projection stores, ``capture_calls.record``) and its entry in ``ng_trajectory.model_calls``
(``observation_calls.trajectory_entry``, derived once when the call is captured). The rest of
the record (metrics, gaps, identity) depends only on per-call figures and the capture state.

Rebuilding the whole record on every capture parses and re-derives every call and rewrites its
JSON: O(calls) work and bytes per capture, O(calls²) per rollout. Here the record is made by
the real pipeline (``enrich_record``) around ONE probe call, and the two lists are replaced by
markers (record_pieces.py): the stored template, filled with the stored pieces on read.
It is used only where filling gives the full rebuild's bytes (checked below; otherwise the
caller rebuilds in full), and ``ledger verify`` rebuilds in full and compares, so a
difference would show.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.areas.captures.derivation import trajectory_entry
from ledger.areas.observations.record_pieces import (
    CALLS_MARKER,
    MODEL_CALLS_MARKER,
    CallTotals,
    template,
)
from ledger.gym.capture_attachment import capture_attachment, strip_payloads
from ledger.gym.model_calls import build_model_call_record
from ledger.gym.record import RolloutEvidence, enrich_record
from ledger.log.canonical import compact_json

# Shapes kept (see CaptureOnlyAssembler): one per recently captured rollout, ~2 KB each.
SHAPE_CACHE_SIZE = 4096
# Where a shape has the metrics, filled on every capture (a NUL cannot appear unescaped in JSON).
_METRICS_MARKER = "\x00ledger:metrics\x00"
_QUOTED_METRICS = compact_json(_METRICS_MARKER)
_PROBE_EXCHANGE: dict[str, Any] = {
    "model_call_id": "ledger-probe",
    "dialect": "chat",
    "model_ref": None,
    "started_at": None,
    "completed_at": None,
    "latency_ms": None,
    "latency_ttft_ms": None,
    "status_code": None,
    "error_category": None,
    "request": None,
    "response": None,
}


@dataclass(frozen=True)
class AssembledRecord:
    # The record as the pipeline built it around the probe call: identity, gaps and every
    # figure but the list lengths are the real record's.
    skeleton: dict[str, Any]
    template: str  # record_pieces.py
    num_calls: int


@dataclass(frozen=True)
class _Shape:
    """A rollout's record around the probe call, metrics left as a marker: all a template needs
    beyond the metrics, for as long as the rollout's capture gaps stay the same."""

    skeleton: dict[str, Any]
    text: str


class CaptureOnlyAssembler:
    """Builds capture-only record templates; holds the probe call (derived once) and the
    shapes of recently seen rollouts, so consecutive captures of a rollout run the pipeline
    once, not once per capture."""

    def __init__(self, *, shapes: int = SHAPE_CACHE_SIZE) -> None:
        self._probe = build_model_call_record(_PROBE_EXCHANGE, 0).model_dump(mode="json")
        entry = trajectory_entry(self._probe)
        assert entry is not None, "the probe call must have a valid trajectory entry"
        self._probe_entry = entry
        self._shapes: OrderedDict[tuple[str, str], _Shape] = OrderedDict()
        self._max_shapes = shapes

    def assemble(
        self, rollout_id: str, totals: CallTotals, gaps: Sequence[Mapping[str, Any]]
    ) -> AssembledRecord | None:
        """The record template of a rollout with these call totals and capture gaps and no
        observations or result; None when filling it would not give the full rebuild.

        Two calls never share a model_call_id here (the capture projection's unique index),
        so the trajectory merges none of them."""
        if totals.count == 0 or totals.missing_entries or totals.sums is None:
            return None
        shape = self._shape(rollout_id, gaps)
        if shape is None:
            return None
        metrics = {**totals.sums, "num_calls": totals.count}
        text = shape.text.replace(_QUOTED_METRICS, compact_json(metrics), 1)
        return AssembledRecord(skeleton=shape.skeleton, template=text, num_calls=totals.count)

    def _shape(self, rollout_id: str, gaps: Sequence[Mapping[str, Any]]) -> _Shape | None:
        key = (rollout_id, compact_json(list(gaps)))
        shape = self._shapes.get(key)
        if shape is not None:
            self._shapes.move_to_end(key)
            return shape
        shape = self._build_shape(rollout_id, gaps)
        if shape is not None:
            self._shapes[key] = shape
            if len(self._shapes) > self._max_shapes:
                self._shapes.popitem(last=False)
        return shape

    def _build_shape(self, rollout_id: str, gaps: Sequence[Mapping[str, Any]]) -> _Shape | None:
        capture = capture_attachment(rollout_id, {}, [self._probe], gaps)
        # The metrics are read by nothing else in the pipeline (the trajectory takes the calls
        # and gaps; ng_perf needs invocations, which a capture-only rollout has none of).
        capture["metrics"] = _METRICS_MARKER
        skeleton = enrich_record(RolloutEvidence(rollout_id=rollout_id, capture=capture))
        if set(skeleton) != {"ng_model_call_capture", "ng_trajectory"}:
            return None  # e.g. the trajectory failed: payloads stay, a gap says why
        calls_holder = skeleton["ng_model_call_capture"]
        trajectory = skeleton["ng_trajectory"]
        model_calls = trajectory.get("model_calls")
        if (
            calls_holder.get("calls") != [strip_payloads(self._probe)]
            or not isinstance(model_calls, list)
            or len(model_calls) != 1
            or compact_json(model_calls[0]) != self._probe_entry
        ):
            return None
        text = template(
            {
                **skeleton,
                "ng_model_call_capture": {**calls_holder, "calls": CALLS_MARKER},
                "ng_trajectory": {**trajectory, "model_calls": MODEL_CALLS_MARKER},
            }
        )
        if text is None or text.count(_QUOTED_METRICS) != 1:
            return None
        return _Shape(skeleton=skeleton, text=text)


__all__ = [
    "AssembledRecord",
    "CaptureOnlyAssembler",
    "trajectory_entry",
]
