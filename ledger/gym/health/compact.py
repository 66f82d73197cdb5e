"""A rollout's health outcome in a compact, position-independent form, and a selection's two
files put together from those forms (no record re-read, no check re-run).

``compact_digest`` checks one record with no check ignored and keeps what the run-level answer
needs: the verdict line's arrays as Gym's JSON text, one bit per check (found something, lacked
its input, raised), and the figures the stats add up. ``summarise`` then gives, for rows in
export order and any ignored checks, exactly what ``quality_summary`` and ``verdict_lines``
give over the evaluated records: ignoring a check only drops its findings and its unobserved
mark (and, for ``check_execution_error``, the findings it reports for others), so the
ignored-checks option is applied here and never needs the record.

The default task index of a record without ``_ng_task_index`` is its position in the
selection: such rows carry ``task_index`` None and are given their position here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.gym.health import catalogue as c
from ledger.gym.health.evaluate import RolloutDigest, evaluate
from ledger.gym.health.facts import record_facts
from ledger.gym.health.summary import Repeat, sort_part, task_findings, task_order

BIT = {check: 1 << position for position, check in enumerate(c.ROLLOUT_CHECKS)}
_CEE = c.CHECK_EXECUTION_ERROR
_DUPLICATE = c.ROLLOUT_DUPLICATE_IDENTITY


def dump(value: Any) -> str:
    """Compact JSON as Gym's verdict file writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(slots=True)
class CompactDigest:
    """One record's outcome (the columns of ``health_findings``, less the keys)."""

    task_index: str | None  # JSON; None: the record has no _ng_task_index
    rollout_index: str  # JSON
    stage_index: str | None  # JSON; None: no stage
    verdict_rollout_id: str | None  # None: derived from the (positional) task index
    verdict: str
    finding_mask: int
    unobserved_mask: int
    raised_mask: int
    finding_count: int
    findings: str  # JSON array of the verdict line's findings
    unobserved: str  # JSON array of the unobserved checks
    capture_observed: bool
    policy_calls_observed: bool
    model_calls: int
    successful_model_calls: int
    model_call_errors: int
    errors_by_status: str | None  # JSON object; None: no failed call
    ended_on_error: bool
    duplicated_calls: int
    transcript_prompt_tokens: int
    transcript_completion_tokens: int
    capture_prompt_tokens: int
    capture_completion_tokens: int

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def from_digest(record: dict[str, Any], digest: RolloutDigest) -> CompactDigest:
    """``digest``: the record checked with nothing ignored (any ordinal)."""
    finding_mask = raised_mask = unobserved_mask = 0
    for finding in digest.findings:
        finding_mask |= BIT[finding.check]
        if finding.check == _CEE:
            raised_mask |= BIT[finding.detail["failed_check"]]
    for check in digest.unobserved:
        unobserved_mask |= BIT[check]
    has_task = "_ng_task_index" in record
    trajectory = record.get("ng_trajectory")
    own_id = record.get("_ng_rollout_id") or (
        trajectory.get("rollout_id") if isinstance(trajectory, dict) else None
    )
    return CompactDigest(
        task_index=dump(digest.task_index) if has_task else None,
        rollout_index=dump(digest.rollout_index),
        stage_index=None if digest.stage_index is None else dump(digest.stage_index),
        verdict_rollout_id=digest.rollout_id if has_task or own_id else None,
        verdict=digest.verdict,
        finding_mask=finding_mask,
        unobserved_mask=unobserved_mask,
        raised_mask=raised_mask,
        finding_count=len(digest.findings),
        findings=dump([finding.line() for finding in digest.findings]),
        unobserved=dump(list(digest.unobserved)),
        capture_observed=digest.capture_observed,
        policy_calls_observed=digest.policy_calls_observed,
        model_calls=digest.model_calls,
        successful_model_calls=digest.successful_model_calls,
        model_call_errors=digest.model_call_errors,
        errors_by_status=dump(digest.errors_by_status) if digest.errors_by_status else None,
        ended_on_error=digest.ended_on_error,
        duplicated_calls=digest.duplicated_calls,
        transcript_prompt_tokens=digest.transcript_prompt_tokens,
        transcript_completion_tokens=digest.transcript_completion_tokens,
        capture_prompt_tokens=digest.capture_prompt_tokens,
        capture_completion_tokens=digest.capture_completion_tokens,
    )


def compact_digest(record: dict[str, Any]) -> CompactDigest:
    """Check a stored record (its ``ng_trajectory`` already canonical) with nothing ignored."""
    return from_digest(record, evaluate(record_facts(record, 0, canonical_trajectory=True)))


class _Json:
    """Parses the small JSON texts of the identity columns once each."""

    def __init__(self) -> None:
        self._seen: dict[str, Any] = {}

    def __call__(self, text: str) -> Any:
        try:
            return self._seen[text]
        except KeyError:
            value = self._seen[text] = json.loads(text)
            return value


@dataclass(frozen=True)
class Ignoring:
    """The ignored checks, as the masks and lists ``summarise`` applies them with."""

    checks: frozenset[str]

    @property
    def mask(self) -> int:
        return sum(BIT[check] for check in self.checks if check in BIT)

    def unobserved_text(self, mask: int) -> str:
        return dump([check for check in c.ROLLOUT_CHECKS if mask & BIT[check]])

    def kept(self, finding: dict[str, Any]) -> bool:
        check = finding["check"]
        if check in self.checks:
            return False
        return not (check == _CEE and finding["detail"]["failed_check"] in self.checks)


@dataclass(slots=True)
class _Outcome:
    """One row after the ignored checks and the duplicate pass."""

    verdict: str
    findings: str
    unobserved: str
    issues: dict[str, int] | None  # findings per check; None: none


def _issues_of(findings_text: str) -> dict[str, int]:
    return dict(Counter(finding["check"] for finding in json.loads(findings_text)))


def _outcome(row: CompactDigest, ignoring: Ignoring, unobserved_texts: dict[int, str]) -> _Outcome:
    mask = ignoring.mask
    touched = (row.finding_mask | row.raised_mask | row.unobserved_mask) & mask
    if not touched:
        issues: dict[str, int] | None = None
        if row.finding_count:
            single = row.finding_mask & (row.finding_mask - 1) == 0
            issues = (
                {c.ROLLOUT_CHECKS[row.finding_mask.bit_length() - 1]: row.finding_count}
                if single
                else _issues_of(row.findings)
            )
        return _Outcome(row.verdict, row.findings, row.unobserved, issues)
    kept = [f for f in json.loads(row.findings) if ignoring.kept(f)]
    unobserved_mask = row.unobserved_mask & ~mask
    unobserved = unobserved_texts.get(unobserved_mask)
    if unobserved is None:
        unobserved = unobserved_texts[unobserved_mask] = ignoring.unobserved_text(unobserved_mask)
    verdict = "unhealthy" if kept else "unobserved" if unobserved_mask else "healthy"
    return _Outcome(
        verdict,
        dump(kept),
        unobserved,
        dict(Counter(f["check"] for f in kept)) if kept else None,
    )


def rollout_outcome(
    row: CompactDigest, ignored: Collection[str]
) -> tuple[str, list[dict[str, Any]], list[str]]:
    """One record's verdict, verdict-line findings and unobserved checks with ``ignored``
    skipped (no run-level check: they need the run)."""
    outcome = _outcome(row, Ignoring(frozenset(ignored)), {})
    return outcome.verdict, json.loads(outcome.findings), json.loads(outcome.unobserved)


def _with_duplicate(outcome: _Outcome, count: int) -> None:
    finding = dump({"check": _DUPLICATE, "detail": {"duplicate_count": count}})
    body = outcome.findings[1:-1]
    outcome.findings = f"[{body},{finding}]" if body else f"[{finding}]"
    outcome.verdict = "unhealthy"
    issues = outcome.issues if outcome.issues is not None else {}
    issues[_DUPLICATE] = issues.get(_DUPLICATE, 0) + 1
    outcome.issues = issues


def _line(task: Any, row: CompactDigest, rollout: Any, outcome: _Outcome, task_text: str) -> bytes:
    rollout_id = row.verdict_rollout_id
    if rollout_id is None:
        rollout_id = f"{task}-{rollout}"
    stage = "" if row.stage_index is None else f',"stage_index":{row.stage_index}'
    return (
        f'{{"_ng_task_index":{task_text},"_ng_rollout_index":{row.rollout_index},'
        f'"rollout_id":{dump(rollout_id)},"verdict":"{outcome.verdict}",'
        f'"findings":{outcome.findings},"unobserved":{outcome.unobserved}{stage}}}\n'
    ).encode()


def summarise(
    rows: Sequence[CompactDigest], ignored: Collection[str]
) -> tuple[dict[str, Any], list[bytes]]:
    """``quality_summary.json`` (as a dict) and the lines of ``rollout_verdicts.jsonl`` for rows
    in export order: the same as ``quality_summary`` and ``verdict_lines`` over the records."""
    parse = _Json()
    ignoring = Ignoring(frozenset(ignored))
    unobserved_texts: dict[int, str] = {}
    tasks: list[Any] = []
    rollouts: list[Any] = []
    stages: list[Any] = []
    outcomes: list[_Outcome] = []
    for position, row in enumerate(rows):
        tasks.append(position if row.task_index is None else parse(row.task_index))
        rollouts.append(parse(row.rollout_index))
        stages.append(None if row.stage_index is None else parse(row.stage_index))
        outcomes.append(_outcome(row, ignoring, unobserved_texts))
    if _DUPLICATE not in ignoring.checks:
        identities = Counter(zip(stages, tasks, rollouts, strict=True))
        for position, identity in enumerate(zip(stages, tasks, rollouts, strict=True)):
            count = identities[identity]
            if count > 1:
                _with_duplicate(outcomes[position], count)
    summary = _summary(rows, ignoring, tasks, rollouts, outcomes)
    order = sorted(
        range(len(rows)),
        key=lambda i: (sort_part(tasks[i]), sort_part(rollouts[i]), sort_part(stages[i])),
    )
    lines = [
        _line(
            tasks[i],
            rows[i],
            rollouts[i],
            outcomes[i],
            str(i) if rows[i].task_index is None else str(rows[i].task_index),
        )
        for i in order
    ]
    return summary, lines


def _task_blocks(
    rows: Sequence[CompactDigest],
    ignoring: Ignoring,
    tasks: list[Any],
    rollouts: list[Any],
    outcomes: list[_Outcome],
) -> tuple[dict[str, Any], dict[str, dict[str, int]], Counter[str]]:
    by_task: dict[Any, dict[Any, list[int]]] = {}
    for position, task in enumerate(tasks):
        by_task.setdefault(task, {}).setdefault(rollouts[position], []).append(position)
    coverage = {check: {"evaluated": 0, "unobserved": 0, "ignored": 0} for check in c.TASK_CHECKS}
    issues: Counter[str] = Counter()
    repeats: dict[Any, list[Repeat]] = {}
    flags: dict[Any, list[str]] = {}
    for task, copies_by_rollout in by_task.items():
        found = repeats[task] = []
        for copies in copies_by_rollout.values():
            verdicts = {outcomes[i].verdict for i in copies}
            found.append(
                Repeat(
                    verdict=verdicts.pop() if len(verdicts) == 1 else "unobserved",  # type: ignore[arg-type]
                    policy_calls_observed=all(rows[i].policy_calls_observed for i in copies),
                    successful_model_calls=max(rows[i].successful_model_calls for i in copies),
                )
            )
        task_flags = task_findings(task, found, ignoring.checks, coverage)
        flags[task] = [finding.check for finding in task_flags]
        issues.update(flags[task])
    blocks: dict[str, Any] = {}
    for task in sorted(repeats, key=task_order):
        counted = Counter(r.verdict for r in repeats[task])
        blocks[str(task)] = {
            "repeats": len(repeats[task]),
            "healthy": counted["healthy"],
            "unhealthy": counted["unhealthy"],
            "unobserved": counted["unobserved"],
            "flags": flags[task],
        }
    return blocks, coverage, issues


def _summary(
    rows: Sequence[CompactDigest],
    ignoring: Ignoring,
    tasks: list[Any],
    rollouts: list[Any],
    outcomes: list[_Outcome],
) -> dict[str, Any]:
    blocks, task_coverage, issues = _task_blocks(rows, ignoring, tasks, rollouts, outcomes)
    records = len(rows)
    masks = Counter(row.unobserved_mask for row in rows)
    coverage: dict[str, dict[str, int]] = {}
    for check in c.ROLLOUT_CHECKS:
        if check in ignoring.checks:
            coverage[check] = {"evaluated": 0, "unobserved": 0, "ignored": records}
        else:
            unobserved = sum(n for mask, n in masks.items() if mask & BIT[check])
            coverage[check] = {
                "evaluated": records - unobserved,
                "unobserved": unobserved,
                "ignored": 0,
            }
    coverage.update(task_coverage)
    verdicts: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    for outcome in outcomes:
        verdicts[outcome.verdict] += 1
        if outcome.issues:
            issues.update(outcome.issues)
    for row in rows:
        if row.errors_by_status is not None:
            by_status.update(json.loads(row.errors_by_status))
    return {
        "run": {
            "ignored_checks": sorted(ignoring.checks),
            "artifacts": {
                "records": records,
                "captures": sum(row.capture_observed for row in rows),
                "coverage": coverage,
            },
            "verdicts": {key: verdicts[key] for key in ("healthy", "unhealthy", "unobserved")},
            "issues": {check: issues[check] for check in c.ALL_CHECKS},
            "stats": {
                "model_call_errors": {
                    "total": sum(row.model_call_errors for row in rows),
                    "by_status": dict(sorted(by_status.items())),
                    "rollouts_affected": sum(bool(row.model_call_errors) for row in rows),
                    "ended_on_error": sum(row.ended_on_error for row in rows),
                },
                "duplicated_calls": {
                    "replayed": sum(row.duplicated_calls for row in rows),
                    "rollouts": sum(bool(row.duplicated_calls) for row in rows),
                },
                "tokens": {
                    "prompt": sum(row.transcript_prompt_tokens for row in rows),
                    "completion": sum(row.transcript_completion_tokens for row in rows),
                    "capture_prompt": sum(row.capture_prompt_tokens for row in rows),
                    "capture_completion": sum(row.capture_completion_tokens for row in rows),
                },
            },
        },
        "tasks": blocks,
    }
