"""A capture-only record stored as a template and filled with its calls' pieces when read.

The record of a rollout that has only captures holds two lists with one entry per call
(``ng_model_call_capture.calls`` and ``ng_trajectory.model_calls``); everything else in it is
small and depends only on per-call figures (capture_only.py). Storing the whole
record on every capture would rewrite every earlier call's JSON: O(calls) bytes per capture,
O(calls²) per rollout. So ``observation_records.record`` holds the record with a marker in place
of each list (``assembled`` is true), and a read fills the markers with the entries stored
per call (``capture_calls.record``, ``observation_calls.trajectory_entry``) in ``call_index``
order: the same bytes the full record would have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.log.canonical import compact_json, parse_json

# Nothing else in a template is free text (rollout ids have a restricted charset; gap details
# are counts), and a NUL cannot appear unescaped in JSON, so each marker occurs exactly once;
# ``template`` checks it anyway.
CALLS_MARKER = "\x00ledger:capture-calls\x00"
MODEL_CALLS_MARKER = "\x00ledger:trajectory-model-calls\x00"
_QUOTED_CALLS = compact_json(CALLS_MARKER)
_QUOTED_MODEL_CALLS = compact_json(MODEL_CALLS_MARKER)


@dataclass(frozen=True)
class CallPiece:
    """What one stored call puts into its rollout's record text."""

    capture_entry: str  # its payload-free record dump: its entry in ng_model_call_capture.calls
    trajectory_entry: str | None  # its entry in ng_trajectory.model_calls (None: not derivable)


@dataclass(frozen=True)
class CallTotals:
    """What a capture-only record needs of all of a rollout generation's stored calls, kept as
    running totals so a capture reads none of the earlier calls: how many there are, how many
    have no trajectory entry, and Gym's null-aware metric sums.

    Calls are only ever added in ``call_index`` order (a clear or a new generation starts
    again), so adding each call's figures in turn gives exactly the left-to-right sums of
    ``aggregate_model_call_values``, floats included.
    """

    count: int = 0
    missing_entries: int = 0
    sums: Mapping[str, int | float | None] | None = None  # None: no call yet

    def add(self, figures: Mapping[str, int | float | None], *, has_entry: bool) -> CallTotals:
        sums = dict(self.sums or dict.fromkeys(figures))
        for name, value in figures.items():
            if value is not None:
                total = sums.get(name)
                sums[name] = value if total is None else total + value
        return CallTotals(
            count=self.count + 1,
            missing_entries=self.missing_entries + (0 if has_entry else 1),
            sums=sums,
        )

    def dump(self) -> str:
        return compact_json(
            {"count": self.count, "missing_entries": self.missing_entries, "sums": self.sums}
        )

    @classmethod
    def load(cls, text: str | None) -> CallTotals:
        if text is None:
            return cls()
        stored = parse_json(text)
        return cls(stored["count"], stored["missing_entries"], stored["sums"])


def template(record: Mapping[str, Any]) -> str | None:
    """The template of a record whose two lists were replaced by the markers (None if the
    markers do not each occur exactly once in its JSON)."""
    text = compact_json(record)
    if text.count(_QUOTED_CALLS) != 1 or text.count(_QUOTED_MODEL_CALLS) != 1:
        return None
    return text


def fill(template_text: str, pieces: Sequence[CallPiece]) -> str:
    """The record's JSON: the template with each marker replaced by its list of entries."""
    entries = [piece.trajectory_entry for piece in pieces]
    if any(entry is None for entry in entries):
        # A template is stored only when every call has an entry, in the same transaction.
        raise ValueError("a capture-only record template has a call without a trajectory entry")
    calls = "[" + ",".join(piece.capture_entry for piece in pieces) + "]"
    model_calls = "[" + ",".join(str(entry) for entry in entries) + "]"
    text = template_text.replace(_QUOTED_CALLS, calls, 1)
    return text.replace(_QUOTED_MODEL_CALLS, model_calls, 1)
