"""``join_model_call_observations`` (§5.2): resolve agent call references against captured calls.

Only exact identifiers establish ownership: a ``model_call_id`` or the exact ``(model_ref,
response_id)`` pair. Timestamps and list positions never do. Anything that does not resolve to
exactly one call becomes a gap, and so does every captured call no invocation owns. The function
is pure and idempotent: its own gaps are dropped from the input and recomputed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from ledger.gym.capture_calls import CapturedCall, captured_calls
from ledger.gym.observations import (
    AgentInvocation,
    AgentObservationBundle,
    AgentObservationRecord,
    ContextCompactionObservation,
    ModelCallRef,
    ObservationGap,
)

REFERENCE_AMBIGUOUS = "model_call_reference_ambiguous"
REFERENCE_CONFLICT = "model_call_reference_conflict"
REFERENCE_UNMATCHED = "model_call_reference_unmatched"
OWNERSHIP_UNAVAILABLE = "model_call_ownership_unavailable"
JOIN_GAP_CODES = frozenset({REFERENCE_AMBIGUOUS, REFERENCE_CONFLICT, REFERENCE_UNMATCHED})
CAPTURE_DETAIL_PREFIX = "capture:"
COMPACTION_CALLS_PREFIX = "model_calls:"


class _CallIndex:
    """Captured calls indexed by id and by (model_ref type, name, response_id)."""

    def __init__(self, calls: list[CapturedCall]) -> None:
        self.by_id: dict[str, list[CapturedCall]] = defaultdict(list)
        self.by_response: dict[tuple[str, str, str], list[CapturedCall]] = defaultdict(list)
        for call in calls:
            if call.model_call_id is not None:
                self.by_id[call.model_call_id].append(call)
            if call.model_ref is not None and call.response_id is not None:
                self.by_response[(*call.model_ref, call.response_id)].append(call)

    def candidates(self, ref: ModelCallRef) -> list[CapturedCall]:
        if ref.model_call_id:
            return [call for call in self.by_id.get(ref.model_call_id, []) if denotes(ref, call)]
        if ref.model_ref is None or not ref.response_id:
            return []
        return list(self.by_response.get((*ref.model_ref.key, ref.response_id), []))


def denotes(ref: ModelCallRef, call: CapturedCall) -> bool:
    """Whether ``ref`` names ``call``: every identifier the ref sets must equal the call's."""
    if ref.model_call_id:
        if ref.model_call_id != call.model_call_id:
            return False
    elif ref.model_ref is None or not ref.response_id:
        return False
    if ref.model_ref is not None and ref.model_ref.key != call.model_ref:
        return False
    return not (ref.response_id is not None and ref.response_id != call.response_id)


def _ref_label(ref: ModelCallRef) -> str:
    return ref.model_call_id or ref.response_id or "unknown"


def _auto_attach_sessions(
    refs_by_invocation: dict[str, list[ModelCallRef]], calls: list[CapturedCall]
) -> None:
    """Step 1: a call whose ``client_session_id`` names an invocation belongs to it."""
    for call in calls:
        if call.client_session_id is None or call.model_call_id is None:
            continue
        refs = refs_by_invocation.get(call.client_session_id)
        if refs is None or any(denotes(ref, call) for ref in refs):
            continue
        refs.append(call.canonical_ref())


def _is_recomputed_gap(gap: ObservationGap) -> bool:
    """Step 4: the gaps this join emits itself; producer gaps are kept."""
    if gap.code in JOIN_GAP_CODES:
        return True
    if gap.code != OWNERSHIP_UNAVAILABLE or gap.detail is None:
        return False
    if gap.invocation_id is None and gap.detail.startswith(CAPTURE_DETAIL_PREFIX):
        return True
    # Not in Gym's list: the compaction gap of step 6. Kept, it would move ahead of the
    # recomputed gaps on a second join, and joining twice must give the same result.
    return gap.invocation_id is not None and gap.detail.startswith(COMPACTION_CALLS_PREFIX)


class _Join:
    def __init__(self, calls: list[CapturedCall]) -> None:
        self.index = _CallIndex(calls)
        self.calls = calls
        self.owner: dict[int, str] = {}
        self.gaps: list[ObservationGap] = []

    def gap(self, code: str, invocation_id: str | None, detail: str) -> None:
        self.gaps.append(ObservationGap(code=code, invocation_id=invocation_id, detail=detail))

    def unique(
        self, ref: ModelCallRef, invocation_id: str, prefix: str = ""
    ) -> CapturedCall | None:
        """The one call ``ref`` names, or None after recording an ambiguous/unmatched gap."""
        candidates = self.index.candidates(ref)
        if len(candidates) == 1:
            return candidates[0]
        code = REFERENCE_AMBIGUOUS if len(candidates) > 1 else REFERENCE_UNMATCHED
        self.gap(code, invocation_id, prefix + _ref_label(ref))
        return None

    def invocation(self, invocation_id: str, refs: list[ModelCallRef]) -> list[ModelCallRef]:
        """Step 5: each uniquely matched, not yet owned call becomes this invocation's."""
        resolved: list[ModelCallRef] = []
        for ref in refs:
            call = self.unique(ref, invocation_id)
            if call is None:
                resolved.append(ref)
            elif call.position in self.owner:
                self.gap(REFERENCE_CONFLICT, invocation_id, call.label)
                resolved.append(ref)
            else:
                self.owner[call.position] = invocation_id
                resolved.append(call.canonical_ref())
        return resolved

    def compaction(self, compaction: ContextCompactionObservation) -> ContextCompactionObservation:
        """Step 6: a compaction may only name calls its own invocation owns."""
        invocation_id = compaction.invocation_id
        resolved: list[ModelCallRef] = []
        for ref in compaction.model_calls:
            call = self.unique(ref, invocation_id, COMPACTION_CALLS_PREFIX)
            owner = None if call is None else self.owner.get(call.position)
            if call is None:
                resolved.append(ref)
            elif owner == invocation_id:
                resolved.append(call.canonical_ref())
            else:
                code = OWNERSHIP_UNAVAILABLE if owner is None else REFERENCE_CONFLICT
                self.gap(code, invocation_id, COMPACTION_CALLS_PREFIX + call.label)
                resolved.append(ref)
        before = self.boundary(compaction.before_model_call, invocation_id, "before_model_call")
        after = self.boundary(compaction.after_model_call, invocation_id, "after_model_call")
        return compaction.model_copy(
            update={"model_calls": resolved, "before_model_call": before, "after_model_call": after}
        )

    def boundary(
        self, ref: ModelCallRef | None, invocation_id: str, field: str
    ) -> ModelCallRef | None:
        """A boundary names a call without owning it; another invocation's call conflicts."""
        if ref is None:
            return None
        call = self.unique(ref, invocation_id, f"{field}:")
        if call is None:
            return ref
        owner = self.owner.get(call.position)
        if owner is not None and owner != invocation_id:
            self.gap(REFERENCE_CONFLICT, invocation_id, f"{field}:{call.label}")
            return ref
        return call.canonical_ref()

    def unowned(self) -> None:
        """Step 7: every captured call nobody owns is visible as a gap."""
        for call in self.calls:
            if call.position not in self.owner:
                self.gap(
                    OWNERSHIP_UNAVAILABLE,
                    None,
                    f"{CAPTURE_DETAIL_PREFIX}{call.label}:call_index={call.call_index}",
                )


def dedupe_gaps(gaps: Iterable[ObservationGap]) -> list[ObservationGap]:
    """Step 8: one gap per (code, invocation_id, detail), first occurrence kept."""
    seen: set[tuple[str, str | None, str | None]] = set()
    unique: list[ObservationGap] = []
    for gap in gaps:
        if gap.identity not in seen:
            seen.add(gap.identity)
            unique.append(gap)
    return unique


def join_model_call_observations(
    bundle: AgentObservationBundle, calls: Iterable[Mapping[str, Any]]
) -> AgentObservationBundle:
    """Return a new bundle with references canonicalised and join gaps recomputed.

    The input is not modified; records the join does not change are shared with it (models
    are copied shallowly: a deep copy of every conversation would dominate the cost).
    """
    captured = captured_calls(calls)
    refs_by_invocation = {
        invocation.invocation_id: list(invocation.model_calls) for invocation in bundle.invocations
    }
    _auto_attach_sessions(refs_by_invocation, captured)
    join = _Join(captured)
    resolved = {
        invocation_id: join.invocation(invocation_id, refs)
        for invocation_id, refs in refs_by_invocation.items()
    }
    records: list[AgentObservationRecord] = []
    for record in bundle.records:
        if isinstance(record, AgentInvocation):
            records.append(
                record.model_copy(update={"model_calls": resolved[record.invocation_id]})
            )
        elif isinstance(record, ContextCompactionObservation):
            records.append(join.compaction(record))
        else:
            records.append(record)
    join.unowned()
    kept = [gap for gap in bundle.gaps if not _is_recomputed_gap(gap)]
    return bundle.model_copy(update={"records": records, "gaps": dedupe_gaps([*kept, *join.gaps])})
