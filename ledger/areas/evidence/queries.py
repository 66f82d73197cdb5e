"""SQL of the evidence area: one rollout's calls, figures per rollout for the coverage of a
selection and the counts of ``/metrics``, and the condition the viewer's overview filters by.

A call's pending-or-missing is decided against ``Window.cutoff`` (bound as a value of
``admitted_at``'s own type, so SQLite compares its stored text the way it wrote it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Select,
    and_,
    bindparam,
    case,
    func,
    or_,
    select,
)

from ledger.areas.evidence.findings import (
    CAPTURE_MISSING,
    CAPTURE_PENDING,
    LINEAGE_ROW_MISSING,
    CallEvidence,
    Coverage,
    Window,
)
from ledger.areas.evidence.tables import evidence_calls as ce
from ledger.areas.health.selection import Selection, superseded_attempts
from ledger.areas.observations.tables import observation_records
from ledger.areas.runs.tables import run_labels
from ledger.log.records import as_utc
from ledger.log.tables import rollouts


@dataclass(frozen=True)
class RolloutEvidence:
    rollout_id: str
    generation: int
    live: bool
    calls: list[CallEvidence]  # in the order the ledger first heard of them

    @property
    def has_rows(self) -> bool:
        return any(call.row_seq is not None for call in self.calls)


def rollout_evidence(conn: Connection, rollout_id: str) -> RolloutEvidence | None:
    """The rollout's current generation's calls; None when the id has no rollout row."""
    state = conn.execute(
        select(rollouts.c.generation, rollouts.c.state).where(rollouts.c.rollout_id == rollout_id)
    ).first()
    if state is None:
        return None
    rows = conn.execute(
        select(ce).where(ce.c.rollout_id == rollout_id, ce.c.generation == state.generation)
    )
    calls = [
        CallEvidence(
            model_call_id=row.model_call_id,
            row_seq=row.row_seq,
            row_kind=row.row_kind,
            intent_seq=row.intent_seq,
            capture_seq=row.capture_seq,
            admitted_at=None if row.admitted_at is None else as_utc(row.admitted_at),
        )
        for row in rows
    ]
    calls.sort(key=lambda call: call.first_seq)
    return RolloutEvidence(rollout_id, state.generation, state.state == "live", calls)


@dataclass(frozen=True)
class RolloutFigures:
    rollout_id: str
    run_label: str | None
    coverage: Coverage


def _sum(condition: Any) -> Any:
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0).cast(Integer)


def rollout_figures(
    conn: Connection, window: Window, selection: Selection | None = None
) -> list[RolloutFigures]:
    """Per rollout with any call evidence (current generations only): its coverage. With a
    selection: its run, id glob, time window (the rollout's last event), task id and attempts
    rule, as ``/v1/health`` selects."""
    admitted = ce.c.row_seq.is_not(None) | ce.c.intent_seq.is_not(None)
    uncaptured = admitted & ce.c.capture_seq.is_(None)
    cutoff = bindparam("cutoff", window.cutoff, type_=ce.c.admitted_at.type)
    pending = uncaptured & (rollouts.c.state == "live") & (ce.c.admitted_at > cutoff)
    source = ce.join(
        rollouts,
        and_(rollouts.c.rollout_id == ce.c.rollout_id, rollouts.c.generation == ce.c.generation),
    ).outerjoin(
        run_labels,
        and_(
            run_labels.c.rollout_id == ce.c.rollout_id, run_labels.c.generation == ce.c.generation
        ),
    )
    query = select(
        ce.c.rollout_id,
        run_labels.c.run_label,
        _sum(admitted).label("admitted"),
        _sum(admitted & ce.c.capture_seq.is_not(None)).label("captured"),
        _sum(pending).label("pending"),
        _sum(uncaptured).label("uncaptured"),
        _sum(ce.c.capture_seq.is_not(None) & ce.c.row_seq.is_(None)).label("without_row"),
        _sum(ce.c.row_seq.is_not(None)).label("rows"),
    )
    if selection is not None and selection.task_id is not None:
        source = source.join(
            observation_records,
            and_(
                observation_records.c.rollout_id == ce.c.rollout_id,
                observation_records.c.generation == ce.c.generation,
                observation_records.c.task_id == selection.task_id,
            ),
        )
    query = query.select_from(source)
    if selection is not None:
        if selection.run is not None:
            query = query.where(run_labels.c.run_label == selection.run)
        if selection.since is not None:
            query = query.where(rollouts.c.updated_at >= selection.since)
        if selection.until is not None:
            query = query.where(rollouts.c.updated_at < selection.until)
    query = query.group_by(ce.c.rollout_id, run_labels.c.run_label)
    figures = []
    for row in conn.execute(query):
        if selection is not None and not selection.matches(row.rollout_id):
            continue
        figures.append(
            RolloutFigures(
                row.rollout_id,
                row.run_label,
                Coverage(
                    rollouts=1,
                    admitted=row.admitted,
                    captured=row.captured,
                    pending=row.pending,
                    missing=row.uncaptured - row.pending,
                    captures_without_row=row.without_row if row.rows else 0,
                ),
            )
        )
    if selection is not None and selection.attempts == "latest":
        superseded = superseded_attempts(f.rollout_id for f in figures)
        figures = [f for f in figures if f.rollout_id not in superseded]
    return figures


def rollout_ids_with_finding(kinds: Sequence[str], cutoff: datetime) -> Select[Any]:
    """The ids of the rollouts whose current generation has a call named one of ``kinds``
    (findings.finding_of in SQL) against ``cutoff`` (the window's: calls admitted after it are
    still pending). Not correlated, for ``rollouts.c.rollout_id.in_(...)``: one pass over
    ``evidence_calls``, whatever the query it filters (a correlated ``EXISTS`` is evaluated per
    row of the outer query, which for the overview's call sums is per captured call)."""
    run = rollouts.alias("evidence_rollouts")
    admitted = ce.c.row_seq.is_not(None) | ce.c.intent_seq.is_not(None)
    uncaptured = admitted & ce.c.capture_seq.is_(None)
    bound = bindparam(None, cutoff, type_=ce.c.admitted_at.type)
    pending = uncaptured & (run.c.state == "live") & (ce.c.admitted_at > bound)
    conditions: list[ColumnElement[bool]] = []
    for kind in kinds:
        if kind == CAPTURE_PENDING:
            conditions.append(pending)
        elif kind == CAPTURE_MISSING:
            conditions.append(uncaptured & ~pending)
        elif kind == LINEAGE_ROW_MISSING:
            other = ce.alias("rows_of_rollout")
            has_rows = (
                select(other.c.model_call_id)
                .where(
                    other.c.rollout_id == ce.c.rollout_id,
                    other.c.generation == ce.c.generation,
                    other.c.row_seq.is_not(None),
                )
                .exists()
            )
            conditions.append(ce.c.capture_seq.is_not(None) & ce.c.row_seq.is_(None) & has_rows)
        else:
            raise ValueError(f"not a finding of call evidence: {kind!r}")
    return (
        select(ce.c.rollout_id)
        .select_from(
            ce.join(
                run, and_(run.c.rollout_id == ce.c.rollout_id, run.c.generation == ce.c.generation)
            )
        )
        .where(or_(*conditions))
        .distinct()
    )
