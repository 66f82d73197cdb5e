"""One rollout's call evidence, bounded: its coverage by one aggregate and at most ``limit`` calls,
those the ledger names first. What the viewer's rollout page reads, so a rollout of 20,000
calls costs it an aggregate and a page, not every row (``queries.rollout_evidence`` has them all,
for the JSON route).

The finding of each shown call is findings.finding_of's; the SQL conditions below are the same
rule, with the rollout's state and whether it has lineage rows known beforehand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Row,
    bindparam,
    case,
    false,
    func,
    select,
)

from ledger.areas.evidence.findings import CallEvidence, Coverage, Window, finding_of
from ledger.areas.evidence.tables import evidence_calls as ce
from ledger.log.records import as_utc
from ledger.log.tables import rollouts

# Above any seq (BIGINT): what a missing seq sorts as.
NEVER = 2**62


@dataclass(frozen=True)
class NamedCall:
    call: CallEvidence
    finding: str | None


@dataclass(frozen=True)
class EvidencePage:
    rollout_id: str
    grace_s: float
    coverage: Coverage
    calls_total: int
    calls: list[NamedCall]  # named ones first, each group in the order the ledger heard of it


def _count(condition: ColumnElement[bool]) -> ColumnElement[int]:
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0).cast(Integer)


def _call(row: Row[Any]) -> CallEvidence:
    return CallEvidence(
        model_call_id=row.model_call_id,
        row_seq=row.row_seq,
        row_kind=row.row_kind,
        intent_seq=row.intent_seq,
        capture_seq=row.capture_seq,
        admitted_at=None if row.admitted_at is None else as_utc(row.admitted_at),
    )


def _least(*values: ColumnElement[Any]) -> ColumnElement[Any]:
    """The smallest non-NULL value (CallEvidence.first_seq), on both backends (SQLite has no
    LEAST, and its scalar min() is NULL as soon as one argument is)."""
    present: list[ColumnElement[Any]] = [func.coalesce(value, NEVER) for value in values]
    smallest = present[0]
    for value in present[1:]:
        smallest = case((value < smallest, value), else_=smallest)
    return smallest


def rollout_evidence_page(
    conn: Connection, rollout_id: str, window: Window, limit: int
) -> EvidencePage | None:
    """None when the id has no rollout row."""
    state = conn.execute(
        select(rollouts.c.generation, rollouts.c.state).where(rollouts.c.rollout_id == rollout_id)
    ).first()
    if state is None:
        return None
    live = state.state == "live"
    of_rollout = (ce.c.rollout_id == rollout_id) & (ce.c.generation == state.generation)
    has_rows = conn.execute(
        select(select(ce.c.model_call_id).where(of_rollout, ce.c.row_seq.is_not(None)).exists())
    ).scalar_one()
    admitted = ce.c.row_seq.is_not(None) | ce.c.intent_seq.is_not(None)
    uncaptured = admitted & ce.c.capture_seq.is_(None)
    cutoff = bindparam("cutoff", window.cutoff, type_=ce.c.admitted_at.type)
    pending = uncaptured & (ce.c.admitted_at > cutoff) if live else false()
    stray = ce.c.capture_seq.is_not(None) & ce.c.row_seq.is_(None) if has_rows else false()
    figures = conn.execute(
        select(
            func.count(),
            _count(admitted),
            _count(admitted & ce.c.capture_seq.is_not(None)),
            _count(pending),
            _count(uncaptured),
            _count(stray),
        ).where(of_rollout)
    ).one()
    total, admitted_n, captured_n, pending_n, uncaptured_n, stray_n = (int(v) for v in figures)
    coverage = Coverage(
        rollouts=1,
        admitted=admitted_n,
        captured=captured_n,
        pending=pending_n,
        missing=uncaptured_n - pending_n,
        captures_without_row=stray_n,
    )
    named = uncaptured | stray
    # The order the ledger first heard of each call, as queries.rollout_evidence sorts.
    heard = _least(ce.c.row_seq, ce.c.intent_seq, ce.c.capture_seq)
    rows = list(
        conn.execute(
            select(ce).where(of_rollout, named).order_by(heard, ce.c.model_call_id).limit(limit)
        )
    )
    if len(rows) < limit:
        rows += conn.execute(
            select(ce)
            .where(of_rollout, ~named)
            .order_by(heard, ce.c.model_call_id)
            .limit(limit - len(rows))
        )
    calls = []
    for row in rows:
        call = _call(row)
        finding = finding_of(call, live=live, rollout_has_rows=bool(has_rows), window=window)
        calls.append(NamedCall(call, finding))
    return EvidencePage(rollout_id, window.grace_s, coverage, total, calls)
