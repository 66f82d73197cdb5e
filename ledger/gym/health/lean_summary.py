"""``compact.summarise`` for the usual case, no rollout check ignored, in fewer, flatter passes.

The caller gives the sums that do not depend on position (``RunSums`` less the verdicts and
issues: SQL adds them up) and the few columns the per-rollout parts need, one list per column
in export order. What stays per rollout is what genuinely depends on the rows together: the
default task index (a position), duplicate identities, the task blocks and the sorted verdict
lines, which are the rows' stored lines (``compact.stored_line``) with those two applied. Each
is a whole-column pass (``Counter`` and ``zip`` run in C), and no per-row container outlives
its pass: at 100,000 rows the garbage collector's full passes over long-lived tuples cost as
much as the work itself. The result is ``summarise``'s byte for byte (tests compare them on
every generated run).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from itertools import compress
from operator import add, not_
from typing import Any, NamedTuple

from ledger.gym.health import catalogue as c
from ledger.gym.health.compact import (
    TASK_KEY,
    JsonTexts,
    RunSums,
    TaskTally,
    document,
    duplicate_finding,
    sort_key_part,
)

_DUPLICATE = c.ROLLOUT_DUPLICATE_IDENTITY
_COLUMN = {"healthy": 1, "unhealthy": 2, "unobserved": 3}


class LeanColumns(NamedTuple):
    """The findings rows' columns that the per-rollout parts read, in export order."""

    task_index: Sequence[str | None]
    rollout_index: Sequence[str]
    stage_index: Sequence[str | None]
    verdict: Sequence[str]
    issue_counts: Sequence[str | None]
    lines: Sequence[bytes]  # StoredLine.text of each row (none may be missing)
    verdict_at: Sequence[int]  # StoredLine's offsets
    findings_end: Sequence[int]
    policy_calls_observed: Sequence[int]  # 0 / 1
    successful: Sequence[int]  # non-zero: some model call succeeded


def _with_duplicate(line: bytes, verdict: str, at: int, end: int, count: int) -> bytes:
    """The stored line unhealthy, with the duplicate finding last in its findings array: the
    stored offsets say where both are, so nothing is searched or parsed."""
    finding = duplicate_finding(count).encode()
    empty = line[end - 2 : end] == b"[]"  # a non-empty array cannot end in "[]"
    return b"".join(
        (
            line[:at],
            b"unhealthy",
            line[at + len(verdict) : end - 1],
            finding if empty else b"," + finding,
            line[end - 1 :],
        )
    )


def _non_negative_ints(*columns: list[Any]) -> bool:
    """Every value an ``int`` (not a ``bool``) and none negative: whole-column passes in C."""
    return all(
        not column or (set(map(type, column)) == {int} and min(column) >= 0) for column in columns
    )


class Identities(NamedTuple):
    """Per row, hashable keys of its (task, rollout) pair and of its (stage, task, rollout)
    identity, and its key in Gym's verdict order (task, rollout, stage; ties in export
    order). When no row has a stage and every index is a non-negative integer (the usual run),
    one integer per row is all three: the pair and the identity coincide, sort_part's (0, n)
    compares as n, and an int is no container for the collector."""

    pairs: list[Any]
    identities: list[Any]
    order: list[Any]

    @classmethod
    def of(cls, tasks: list[Any], rollouts: list[Any], stages: list[Any]) -> Identities:
        if stages.count(None) == len(stages) and _non_negative_ints(tasks, rollouts):
            width = max(rollouts, default=0) + 1
            keys = list(map(add, map(width.__mul__, tasks), rollouts))
            return cls(keys, keys, keys)
        return cls(
            list(zip(tasks, rollouts, strict=True)),
            list(zip(stages, tasks, rollouts, strict=True)),
            [
                (sort_key_part(task), sort_key_part(rollout), sort_key_part(stage))
                for task, rollout, stage in zip(tasks, rollouts, stages, strict=True)
            ],
        )

    def counts(self) -> tuple[Counter[Any], Counter[Any]]:
        """Rows per pair and rows per identity (one count when they coincide)."""
        per_pair = Counter(self.pairs)
        return per_pair, per_pair if self.identities is self.pairs else Counter(self.identities)

    def verdict_order(self) -> list[int]:
        return sorted(range(len(self.order)), key=self.order.__getitem__)


def _tallies(
    tasks: list[Any],
    verdicts: list[str],
    rows: LeanColumns,
    pairs: list[Any],
    per_pair: Counter[Any],
) -> dict[Any, TaskTally]:
    """As ``compact._task_tallies``: one repeat per (task, rollout), copies collapsed."""
    tallies: dict[Any, TaskTally] = {task: [0, 0, 0, 0, 1, 0] for task in dict.fromkeys(tasks)}
    if len(per_pair) == len(tasks):  # no copies: every row is a repeat of its own
        for (task, verdict), n in Counter(zip(tasks, verdicts, strict=True)).items():
            tally = tallies[task]
            tally[0] += n
            tally[_COLUMN[verdict]] += n
    else:
        # The rows of a pair with copies, picked in C; only they are visited in Python.
        copied = list(map((1).__lt__, map(per_pair.__getitem__, pairs)))
        alone = compress(zip(tasks, verdicts, strict=True), map(not_, copied))
        for (task, verdict), n in Counter(alone).items():
            tally = tallies[task]
            tally[0] += n
            tally[_COLUMN[verdict]] += n
        copies: dict[Any, tuple[Any, set[str]]] = {}
        for task, pair, verdict in compress(zip(tasks, pairs, verdicts, strict=True), copied):
            copies.setdefault(pair, (task, set()))[1].add(verdict)
        for task, seen in copies.values():
            tally = tallies[task]
            tally[0] += 1
            tally[_COLUMN[seen.pop() if len(seen) == 1 else "unobserved"]] += 1
    # All policy calls observed: every row of the task (copies included); any success: one.
    for task in compress(tasks, map(not_, rows.policy_calls_observed)):
        tallies[task][4] = 0
    for task in compress(tasks, rows.successful):
        tallies[task][5] = 1
    return tallies


def _verdict_lines(rows: LeanColumns, duplicated: dict[int, int], order: list[int]) -> list[bytes]:
    """The verdict file's lines in ``order``: the stored lines, those of duplicate identities
    rewritten and those of records without a task index given their position, put in order by
    ``map`` (in C)."""
    lines = list(rows.lines)
    for position, count in duplicated.items():
        lines[position] = _with_duplicate(
            lines[position],
            rows.verdict[position],
            rows.verdict_at[position],
            rows.findings_end[position],
            count,
        )
    if None in rows.task_index:  # the default task index is the record's position
        for position, text in enumerate(rows.task_index):
            if text is None:
                lines[position] = b"%s%d%s" % (TASK_KEY, position, lines[position])
    return list(map(lines.__getitem__, order))


def summarise_lean(
    rows: LeanColumns, sums: RunSums, ignored: Collection[str]
) -> tuple[dict[str, Any], list[bytes]]:
    """``quality_summary.json`` (as a dict) and ``rollout_verdicts.jsonl``'s lines. ``sums``:
    the position-independent sums over the same rows (verdicts and issues left empty); no
    rollout check may be ignored (``compact.summarise`` applies those)."""
    parse = JsonTexts()
    # Each distinct text parsed once; the columns then mapped through the dict (in C).
    values: dict[str | None, Any] = {
        text: None if text is None else parse(text)
        for text in {*rows.task_index, *rows.rollout_index, *rows.stage_index}
    }
    tasks = list(map(values.__getitem__, rows.task_index))
    if None in rows.task_index:  # records without one: their position is their task index
        tasks = [
            position if text is None else task
            for position, (text, task) in enumerate(zip(rows.task_index, tasks, strict=True))
        ]
    rollouts = list(map(values.__getitem__, rows.rollout_index))
    stages = list(map(values.__getitem__, rows.stage_index))
    verdicts = list(rows.verdict)
    issues: Counter[str] = Counter()
    for text, n in Counter(rows.issue_counts).items():
        if text is not None:
            for check, count in parse(text).items():
                issues[check] += count * n
    keys = Identities.of(tasks, rollouts, stages)
    per_pair, copies = keys.counts()
    duplicated: dict[int, int] = {}  # position -> rows of its identity
    if len(copies) < len(tasks):
        counts = list(map(copies.__getitem__, keys.identities))
        for position in compress(range(len(counts)), map((1).__lt__, counts)):
            duplicated[position] = counts[position]
            verdicts[position] = "unhealthy"
        issues[_DUPLICATE] += len(duplicated)
    sums.verdicts = Counter(verdicts)
    sums.issues = issues
    summary = document(sums, ignored, _tallies(tasks, verdicts, rows, keys.pairs, per_pair))
    lines = _verdict_lines(rows, duplicated, keys.verdict_order())
    return summary, lines
