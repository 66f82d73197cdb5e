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
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.gym.health import catalogue as c
from ledger.gym.health.evaluate import RolloutDigest, evaluate
from ledger.gym.health.facts import record_facts
from ledger.gym.health.summary import sort_part, task_order

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
    issue_counts: str | None  # JSON object check -> findings; None: no finding
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
        issue_counts=dump(dict(Counter(f.check for f in digest.findings)))
        if digest.findings
        else None,
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


class JsonTexts:
    """Parses the small JSON texts of the identity columns once each."""

    def __init__(self) -> None:
        self._seen: dict[str, Any] = {}

    def __call__(self, text: str) -> Any:
        if text.isdigit():  # a non-negative JSON int (a string value would be quoted)
            return int(text)
        try:
            return self._seen[text]
        except KeyError:
            value = self._seen[text] = json.loads(text)
            return value


class Ignoring:
    """The ignored checks, as the mask and lists ``summarise`` applies them with."""

    def __init__(self, checks: Collection[str]) -> None:
        self.checks = frozenset(checks)
        self.mask = sum(BIT[check] for check in self.checks if check in BIT)

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


_CHECK_OF_BIT = {bit: check for check, bit in BIT.items()}


def _outcome(
    row: CompactDigest,
    ignoring: Ignoring,
    unobserved_texts: dict[int, str],
    issues: Counter[str],
    parse: JsonTexts,
) -> _Outcome:
    """The row with the ignored checks skipped; its findings counted in ``issues``."""
    mask = ignoring.mask
    if not (row.finding_mask | row.raised_mask | row.unobserved_mask) & mask:
        if row.issue_counts is not None:
            check = _CHECK_OF_BIT.get(row.finding_mask)  # one check found them all
            if check is not None:
                issues[check] += row.finding_count
            else:
                for name, count in parse(row.issue_counts).items():
                    issues[name] += count
        return _Outcome(row.verdict, row.findings, row.unobserved)
    kept = [f for f in json.loads(row.findings) if ignoring.kept(f)]
    issues.update(f["check"] for f in kept)
    unobserved_mask = row.unobserved_mask & ~mask
    unobserved = unobserved_texts.get(unobserved_mask)
    if unobserved is None:
        unobserved = unobserved_texts[unobserved_mask] = ignoring.unobserved_text(unobserved_mask)
    verdict = "unhealthy" if kept else "unobserved" if unobserved_mask else "healthy"
    return _Outcome(verdict, dump(kept), unobserved)


def rollout_outcome(
    row: CompactDigest, ignored: Collection[str]
) -> tuple[str, list[dict[str, Any]], list[str]]:
    """One record's verdict, verdict-line findings and unobserved checks with ``ignored``
    skipped (no run-level check: they need the run)."""
    outcome = _outcome(row, Ignoring(ignored), {}, Counter(), JsonTexts())
    return outcome.verdict, json.loads(outcome.findings), json.loads(outcome.unobserved)


def _with_duplicate(outcome: _Outcome, count: int) -> None:
    finding = duplicate_finding(count)
    body = outcome.findings[1:-1]
    outcome.findings = f"[{body},{finding}]" if body else f"[{finding}]"
    outcome.verdict = "unhealthy"


# Strings json.dumps writes as they are, between quotes.
PLAIN = re.compile(r"[A-Za-z0-9 ._:/@+=-]*")


def _line_parts(row: CompactDigest, outcome: _Outcome, task_text: str, rollout_id: str) -> str:
    quoted = f'"{rollout_id}"' if PLAIN.fullmatch(rollout_id) else dump(rollout_id)
    stage = "" if row.stage_index is None else f',"stage_index":{row.stage_index}'
    return (
        f'{{"_ng_task_index":{task_text},"_ng_rollout_index":{row.rollout_index},'
        f'"rollout_id":{quoted},"verdict":"{outcome.verdict}",'
        f'"findings":{outcome.findings},"unobserved":{outcome.unobserved}{stage}}}\n'
    )


def _line(task: Any, row: CompactDigest, rollout: Any, outcome: _Outcome, task_text: str) -> bytes:
    rollout_id = row.verdict_rollout_id
    if rollout_id is None:
        rollout_id = f"{task}-{rollout}"
    return _line_parts(row, outcome, task_text, rollout_id).encode()


TASK_KEY = b'{"_ng_task_index":'


def duplicate_finding(count: int) -> str:
    """The finding the run-level duplicate check adds to a line (``dump``'s text)."""
    return f'{{"check":"{_DUPLICATE}","detail":{{"duplicate_count":{count}}}}}'


@dataclass(frozen=True, slots=True)
class StoredLine:
    """A record's verdict line as far as it is position-free, with nothing ignored and before
    the duplicate pass: its UTF-8 bytes, or for a record without ``_ng_task_index`` the bytes
    after that key's (positional) value; and where in them its verdict starts and its findings
    array ends (just past the ``]``), so the duplicate pass can rewrite both without parsing."""

    text: bytes
    verdict_at: int
    findings_end: int


def stored_line(row: CompactDigest) -> StoredLine | None:
    """None when the line's rollout id is itself derived from the positional task index."""
    if row.verdict_rollout_id is None:
        return None
    outcome = _Outcome(row.verdict, row.findings, row.unobserved)
    text = _line_parts(row, outcome, row.task_index or "0", row.verdict_rollout_id).encode()
    if row.task_index is None:  # the position is filled in per selection
        text = text[len(TASK_KEY) + len("0") :]  # the key and its one-byte placeholder
    tail = f',"unobserved":{row.unobserved}'.encode()
    if row.stage_index is not None:
        tail += f',"stage_index":{row.stage_index}'.encode()
    findings_end = len(text) - len(tail) - 2  # 2: the closing brace and newline
    verdict_at = findings_end - len(f'{row.verdict}","findings":{row.findings}'.encode())
    return StoredLine(text, verdict_at, findings_end)


# A task's tally: [repeats, healthy, unhealthy, unobserved, all policy observed, any success].
TaskTally = list[int]
_NO_PART = sort_part(None)


def sort_key_part(value: Any) -> tuple[int, Any]:
    if type(value) is int:
        return (0, value)
    return _NO_PART if value is None else sort_part(value)


def summarise(
    rows: Sequence[CompactDigest], ignored: Collection[str]
) -> tuple[dict[str, Any], list[bytes]]:
    """``quality_summary.json`` (as a dict) and the lines of ``rollout_verdicts.jsonl`` for rows
    in export order: the same as ``quality_summary`` and ``verdict_lines`` over the records."""
    parse = JsonTexts()
    ignoring = Ignoring(ignored)
    unobserved_texts: dict[int, str] = {}
    issues: Counter[str] = Counter()
    tasks: list[Any] = []
    rollouts: list[Any] = []
    stages: list[Any] = []
    outcomes: list[_Outcome] = []
    check_of_bit = _CHECK_OF_BIT
    for position, row in enumerate(rows):
        tasks.append(position if row.task_index is None else parse(row.task_index))
        rollouts.append(parse(row.rollout_index))
        stages.append(None if row.stage_index is None else parse(row.stage_index))
        if ignoring.mask:
            outcomes.append(_outcome(row, ignoring, unobserved_texts, issues, parse))
            continue
        # No rollout check ignored (the usual case): the row as stored, inlined.
        outcomes.append(_Outcome(row.verdict, row.findings, row.unobserved))
        if row.issue_counts is not None:
            check = check_of_bit.get(row.finding_mask)
            if check is not None:
                issues[check] += row.finding_count
            else:
                for name, count in parse(row.issue_counts).items():
                    issues[name] += count
    if _DUPLICATE not in ignoring.checks:
        identities = Counter(zip(stages, tasks, rollouts, strict=True))
        for position, identity in enumerate(zip(stages, tasks, rollouts, strict=True)):
            count = identities[identity]
            if count > 1:
                _with_duplicate(outcomes[position], count)
                issues[_DUPLICATE] += 1
    summary = _summary(rows, ignoring, tasks, rollouts, outcomes, issues)
    keys = [
        (sort_key_part(tasks[i]), sort_key_part(rollouts[i]), sort_key_part(stages[i]))
        for i in range(len(rows))
    ]
    order = sorted(range(len(rows)), key=keys.__getitem__)
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


def _task_tallies(
    rows: Sequence[CompactDigest],
    tasks: list[Any],
    rollouts: list[Any],
    outcomes: list[_Outcome],
) -> dict[Any, TaskTally]:
    """Per task: its repeats (one per rollout index, copies collapsed as
    ``summary._repeats`` does) tallied."""
    # task -> [repeats, healthy, unhealthy, unobserved, all policy observed, any success];
    # keyed by each task's first value, in first-seen order (a dict's rule, as in summary.py).
    tallies: dict[Any, list[int]] = {task: [0, 0, 0, 0, 1, 0] for task in dict.fromkeys(tasks)}
    column = {"healthy": 1, "unhealthy": 2, "unobserved": 3}
    pairs = list(zip(tasks, rollouts, strict=True))
    per_pair = Counter(pairs)
    copies: dict[tuple[Any, Any], list[int]] = {}
    for position, pair in enumerate(pairs):
        if per_pair[pair] == 1:  # the common case: one record per (task, rollout)
            row = rows[position]
            tally = tallies[pair[0]]
            tally[0] += 1
            tally[column[outcomes[position].verdict]] += 1
            if not row.policy_calls_observed:
                tally[4] = 0
            if row.successful_model_calls:
                tally[5] = 1
        else:
            copies.setdefault(pair, []).append(position)
    for (task, _rollout), held in copies.items():
        verdicts = {outcomes[i].verdict for i in held}
        tally = tallies[task]
        tally[0] += 1
        tally[column[verdicts.pop() if len(verdicts) == 1 else "unobserved"]] += 1
        if not all(rows[i].policy_calls_observed for i in held):
            tally[4] = 0
        if max(rows[i].successful_model_calls for i in held):
            tally[5] = 1
    return tallies


def task_blocks(
    tallies: dict[Any, TaskTally], ignored: Collection[str]
) -> tuple[dict[str, Any], dict[str, dict[str, int]], Counter[str]]:
    """The per-task blocks, the task checks' coverage and their issues (``summary.task_findings``)
    from each task's tally of its repeats."""
    coverage = {check: {"evaluated": 0, "unobserved": 0, "ignored": 0} for check in c.TASK_CHECKS}
    consistent = coverage[c.TASK_CONSISTENTLY_UNHEALTHY]
    no_success = coverage[c.TASK_NO_SUCCESSFUL_MODEL_CALLS]
    skip_consistent = c.TASK_CONSISTENTLY_UNHEALTHY in ignored
    skip_no_success = c.TASK_NO_SUCCESSFUL_MODEL_CALLS in ignored
    flagged_consistent = flagged_no_success = 0
    blocks: dict[str, Any] = {}
    for task in sorted(tallies, key=task_order):
        repeats, healthy, unhealthy, unobserved, observed_all, any_success = tallies[task]
        flags = []
        if skip_consistent:
            consistent["ignored"] += 1
        elif healthy + unhealthy >= 2:
            consistent["evaluated"] += 1
            if not healthy:
                flags.append(c.TASK_CONSISTENTLY_UNHEALTHY)
                flagged_consistent += 1
        else:
            consistent["unobserved"] += 1
        if skip_no_success:
            no_success["ignored"] += 1
        elif observed_all:
            no_success["evaluated"] += 1
            if not any_success:
                flags.append(c.TASK_NO_SUCCESSFUL_MODEL_CALLS)
                flagged_no_success += 1
        else:
            no_success["unobserved"] += 1
        blocks[str(task)] = {
            "repeats": repeats,
            "healthy": healthy,
            "unhealthy": unhealthy,
            "unobserved": unobserved,
            "flags": flags,
        }
    issues = Counter(
        {
            c.TASK_CONSISTENTLY_UNHEALTHY: flagged_consistent,
            c.TASK_NO_SUCCESSFUL_MODEL_CALLS: flagged_no_success,
        }
    )
    return blocks, coverage, issues


@dataclass(slots=True)
class RunSums:
    """What ``quality_summary.json`` adds up over a selection's rows (after the duplicate
    pass), apart from the task blocks."""

    records: int
    captures: int
    unobserved: dict[str, int]  # rollout check -> rows lacking its input
    verdicts: Counter[str]
    issues: Counter[str]  # rollout checks' findings (task checks are added by ``document``)
    errors: int
    by_status: Counter[str]
    affected: int
    ended: int
    replayed: int
    replaying: int
    prompt: int
    completion: int
    capture_prompt: int
    capture_completion: int


def document(
    sums: RunSums, ignored: Collection[str], tallies: dict[Any, TaskTally]
) -> dict[str, Any]:
    """``quality_summary.json`` (as a dict) from the sums and the task tallies."""
    blocks, task_coverage, task_issues = task_blocks(tallies, ignored)
    issues = sums.issues + task_issues
    records = sums.records
    coverage: dict[str, dict[str, int]] = {}
    for check in c.ROLLOUT_CHECKS:
        if check in ignored:
            coverage[check] = {"evaluated": 0, "unobserved": 0, "ignored": records}
        else:
            unobserved = sums.unobserved.get(check, 0)
            coverage[check] = {
                "evaluated": records - unobserved,
                "unobserved": unobserved,
                "ignored": 0,
            }
    coverage.update(task_coverage)
    return {
        "run": {
            "ignored_checks": sorted(ignored),
            "artifacts": {
                "records": records,
                "captures": sums.captures,
                "coverage": coverage,
            },
            "verdicts": {key: sums.verdicts[key] for key in ("healthy", "unhealthy", "unobserved")},
            "issues": {check: issues[check] for check in c.ALL_CHECKS},
            "stats": {
                "model_call_errors": {
                    "total": sums.errors,
                    "by_status": dict(sorted(sums.by_status.items())),
                    "rollouts_affected": sums.affected,
                    "ended_on_error": sums.ended,
                },
                "duplicated_calls": {"replayed": sums.replayed, "rollouts": sums.replaying},
                "tokens": {
                    "prompt": sums.prompt,
                    "completion": sums.completion,
                    "capture_prompt": sums.capture_prompt,
                    "capture_completion": sums.capture_completion,
                },
            },
        },
        "tasks": blocks,
    }


def position_free_sums(rows: Sequence[CompactDigest]) -> RunSums:
    """The sums that do not depend on where a row is (its verdict may, by the duplicate pass:
    verdicts and issues are left empty for the caller)."""
    masks = Counter(row.unobserved_mask for row in rows)
    unobserved = {
        check: sum(n for mask, n in masks.items() if mask & BIT[check])
        for check in c.ROLLOUT_CHECKS
    }
    by_status: Counter[str] = Counter()
    captures = errors = affected = ended = replayed = replaying = 0
    prompt = completion = capture_prompt = capture_completion = 0
    for row in rows:  # one pass: the stats' sums
        if row.capture_observed:
            captures += 1
        if row.model_call_errors:
            errors += row.model_call_errors
            affected += 1
        if row.errors_by_status is not None:
            for status, count in json.loads(row.errors_by_status).items():
                by_status[status] += count
        if row.ended_on_error:
            ended += 1
        if row.duplicated_calls:
            replayed += row.duplicated_calls
            replaying += 1
        prompt += row.transcript_prompt_tokens
        completion += row.transcript_completion_tokens
        capture_prompt += row.capture_prompt_tokens
        capture_completion += row.capture_completion_tokens
    return RunSums(
        records=len(rows),
        captures=captures,
        unobserved=unobserved,
        verdicts=Counter(),
        issues=Counter(),
        errors=errors,
        by_status=by_status,
        affected=affected,
        ended=ended,
        replayed=replayed,
        replaying=replaying,
        prompt=prompt,
        completion=completion,
        capture_prompt=capture_prompt,
        capture_completion=capture_completion,
    )


def _summary(
    rows: Sequence[CompactDigest],
    ignoring: Ignoring,
    tasks: list[Any],
    rollouts: list[Any],
    outcomes: list[_Outcome],
    issues: Counter[str],
) -> dict[str, Any]:
    sums = position_free_sums(rows)
    sums.verdicts = Counter(outcome.verdict for outcome in outcomes)
    sums.issues = issues
    return document(sums, ignoring.checks, _task_tallies(rows, tasks, rollouts, outcomes))
