"""The overview's run-level health: which checks fail on how many rollouts (with links), the
verdicts, and each task's unhealthy rollouts, over the latest attempt of each rollout of the
selection, as ``/v1/health`` counts them.

It reads what the health area keeps (``health_findings``: each record's checks, computed by the
follower) under the same freshness rule: a row is used only when computed from the record as
it is now; a missing or stale one is checked here from the record, up to ``RECHECK_LIMIT`` per
load (past that the page says how many were not checked rather than stall). The duplicate
identity check (two records claiming one task and rollout) is applied as ``/v1/health``
applies it; the task checks are ``/v1/health``'s alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, select, true

from ledger.areas.health.findings_store import records_by_id
from ledger.areas.health.selection import superseded_attempts
from ledger.areas.health.tables import health_findings
from ledger.areas.observations.tables import observation_records
from ledger.areas.viewer.health_words import ROLLOUT_CHECKS
from ledger.gym.health.compact import compact_digest
from ledger.gym.ids import split_transport_rollout_id
from ledger.log.canonical import parse_json
from ledger.log.tables import rollouts

RECHECK_LIMIT = 500
EXAMPLES = 5
DUPLICATE = "rollout_duplicate_identity"


@dataclass(frozen=True)
class CheckRow:
    check: str
    failing: int  # latest attempts with a finding of this check
    unobserved: int  # latest attempts where it lacked its input
    examples: tuple[str, ...]  # the first failing rollouts, by id


@dataclass(frozen=True)
class RunHealth:
    counted: int  # latest attempts with a checked record
    superseded: int  # earlier attempts left out
    without_record: int  # selected rollouts with no record to check
    unchecked: int  # records neither checked by the follower nor here (over the limit)
    verdicts: dict[str, int]
    checks: tuple[CheckRow, ...]
    unhealthy: frozenset[str]


@dataclass
class _Outcome:
    verdict: str
    finding_mask: int
    unobserved_mask: int
    identity: tuple[Any, ...]


def _bits(mask: int) -> list[str]:
    return [check for i, check in enumerate(ROLLOUT_CHECKS) if mask & (1 << i)]


def _statement(joined: Any, conditions: list[Any]) -> Any:
    return (
        select(
            rollouts.c.rollout_id,
            observation_records.c.last_seq,
            health_findings.c.last_seq.label("findings_seq"),
            health_findings.c.verdict,
            health_findings.c.finding_mask,
            health_findings.c.unobserved_mask,
            health_findings.c.task_index,
            health_findings.c.rollout_index,
            health_findings.c.stage_index,
        )
        .select_from(
            joined.outerjoin(health_findings, health_findings.c.rollout_id == rollouts.c.rollout_id)
        )
        .where(and_(true(), *conditions))
    )


def latest_only(rollout_ids: list[str]) -> set[str]:
    """The ids a later attempt supersedes (``superseded_attempts``), splitting only the ids
    that can share a logical id: two ids of one (task, rollout) differ, so at least one of
    them carries an ``-a<n>`` suffix."""
    suffixed = {split_transport_rollout_id(r)[0] for r in rollout_ids if "-a" in r}
    if not suffixed:
        return set()
    related = [
        r
        for r in rollout_ids
        if r in suffixed or ("-a" in r and split_transport_rollout_id(r)[0] in suffixed)
    ]
    return superseded_attempts(related)


def read_run_health(conn: Connection, conditions: list[Any], joined: Any) -> RunHealth:
    """``conditions``: the overview filter's WHERE over ``joined`` (its rollouts / capture /
    records join), so the selection is the overview's."""
    # Export order (the records' last seq), which gives a record without _ng_task_index its
    # positional task index, as /v1/health does.
    rows = conn.execute(
        _statement(joined, conditions).order_by(observation_records.c.last_seq)
    ).all()
    with_record = [row for row in rows if row[1] is not None]
    superseded = latest_only([row[0] for row in with_record])
    kept = [row for row in with_record if row[0] not in superseded]
    outcomes: dict[str, _Outcome] = {}
    stale: list[str] = []
    for position, (
        rollout_id,
        last_seq,
        seen_seq,
        verdict,
        found,
        lacked,
        task,
        rollout,
        stage,
    ) in enumerate(kept):
        if seen_seq is not None and seen_seq == last_seq:
            identity = (stage, str(position) if task is None else task, rollout)
            outcomes[rollout_id] = _Outcome(verdict, found, lacked, identity)
        else:
            stale.append(rollout_id)
    if stale:
        position_of = {row[0]: position for position, row in enumerate(kept)}
        for rollout_id, text in records_by_id(conn, stale[:RECHECK_LIMIT]).items():
            d = compact_digest(parse_json(text))
            task = str(position_of[rollout_id]) if d.task_index is None else d.task_index
            identity = (d.stage_index, task, d.rollout_index)
            outcomes[rollout_id] = _Outcome(d.verdict, d.finding_mask, d.unobserved_mask, identity)
    _mark_duplicates(outcomes)
    return _tally(outcomes, len(superseded), len(rows) - len(with_record), len(kept))


def _mark_duplicates(outcomes: dict[str, _Outcome]) -> None:
    """Gym's run-level pass: every record of a (stage, task, rollout) identity held twice is
    unhealthy."""
    held = Counter(o.identity for o in outcomes.values())
    if not held or max(held.values()) < 2:
        return
    bit = 1 << ROLLOUT_CHECKS.index(DUPLICATE)
    for outcome in outcomes.values():
        if held[outcome.identity] > 1:
            outcome.verdict = "unhealthy"
            outcome.finding_mask |= bit


def _tally(
    outcomes: dict[str, _Outcome], superseded: int, without_record: int, kept: int
) -> RunHealth:
    verdicts = Counter(o.verdict for o in outcomes.values())
    failing: dict[str, list[str]] = {check: [] for check in ROLLOUT_CHECKS}
    unobserved: Counter[str] = Counter()
    for rollout_id, outcome in outcomes.items():
        for check in _bits(outcome.finding_mask):
            failing[check].append(rollout_id)
        unobserved.update(_bits(outcome.unobserved_mask))
    checks = tuple(
        CheckRow(check, len(ids), unobserved[check], tuple(sorted(ids)[:EXAMPLES]))
        for check, ids in failing.items()
        if ids or unobserved[check]
    )
    return RunHealth(
        counted=len(outcomes),
        superseded=superseded,
        without_record=without_record,
        unchecked=kept - len(outcomes),
        verdicts={v: verdicts[v] for v in ("healthy", "unhealthy", "unobserved")},
        checks=checks,
        unhealthy=frozenset(r for r, o in outcomes.items() if o.verdict == "unhealthy"),
    )
