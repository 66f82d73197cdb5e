"""A selection's quality summary from ``health_findings`` in one statement: per selected record
in export order, the narrow columns the per-rollout parts need (``lean_summary.summarise_lean``),
the row's stored verdict line, and the figures the stats add up, packed in one value
(row_figures.py), which Python sums a whole column at a time.

It answers when every selected record has a fresh row with a stored line and figures and no
rollout check is ignored; else it returns None and the caller puts the rows through
``compact.summarise`` (stale ones checked on read). The statement is a plain scan in index
order: no window, sort or ``GROUP BY`` (SQLite sorts for each, which costs more than the Python
they would replace). The sums were a second statement once: at 100,000 rows a second scan with
its join cost more than summing the fetched columns (``sum`` over a tuple of ints runs in C),
and at 1,000 rows its round trip was a third of the answer.
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, Connection, Integer, Select, case, literal_column, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.health.queries import restricted, selection_params
from ledger.areas.health.row_figures import figure_columns
from ledger.areas.health.selection import Selection
from ledger.areas.health.tables import health_findings as hf
from ledger.areas.observations.tables import observation_records as records
from ledger.gym.health import catalogue as c
from ledger.gym.health.compact import BIT, RunSums
from ledger.gym.health.lean_summary import LeanColumns, summarise_lean
from ledger.log.driver import DriverQuery


@dataclass(frozen=True)
class QuickSummary:
    summary: dict[str, Any]  # quality_summary.json
    lines: list[bytes]  # rollout_verdicts.jsonl, in Gym's order
    records: int  # rows summarised (the selection less the excluded attempts)


_ONE = literal_column("1", Integer)
_ZERO = literal_column("0", Integer)


def _flag(condition: ColumnElement[bool]) -> ColumnElement[int]:
    # Literals in the SQL, not bound: the statement then needs only the selection's values.
    return case((condition, _ONE), else_=_ZERO)


def _over_selection(
    query: Select[Any],
    selection: Selection,
    excluded: Collection[str],
    conn: Connection | AsyncConnection,
) -> Select[Any]:
    query = restricted(query, selection, conn, with_findings=True)
    if excluded:
        query = query.where(records.c.rollout_id.not_in(sorted(excluded)))
    return query


@cache
def _row_columns() -> tuple[ColumnElement[Any], ...]:
    """The statement's columns, built once per process (the expressions are immutable): the
    identity, the verdict and the issues, the stored line, the failed-call statuses (the one
    JSON sum), the freshness flag and the packed figures (row_figures.py): nine values a row
    where each figure its own column made twenty-one."""
    return (
        hf.c.task_index,
        hf.c.rollout_index,
        hf.c.stage_index,
        hf.c.verdict,
        hf.c.issue_counts,
        hf.c.verdict_line,
        hf.c.errors_by_status,
        # 1: the row was computed from this very record (the freshness rule); NULLs give 0.
        _flag(hf.c.last_seq == records.c.last_seq),
        hf.c.figures,
    )


def summary_rows_statement(
    selection: Selection, excluded: Collection[str], conn: Connection | AsyncConnection
) -> Select[Any]:
    """Per selected record in export order: ``_row_columns()``."""
    query = select(*_row_columns()).order_by(records.c.last_seq)
    return _over_selection(query, selection, excluded, conn)


# The statement of each shape (dialect, the selection's parameter names), compiled once and
# run on the driver's cursor: building and executing it through Core each time (its cache key,
# execution context and ``Row``s) was a tenth of a 1,000-rollout answer.
_COMPILED: dict[tuple[str, frozenset[str]], DriverQuery] = {}


def _summary_rows(
    conn: Connection, selection: Selection, excluded: Collection[str]
) -> Sequence[Any]:
    if excluded:  # a NOT IN list of its own length: Core expands it
        return conn.execute(summary_rows_statement(selection, excluded, conn)).tuples().all()
    params = selection_params(selection, conn.dialect.name)
    key = (conn.dialect.name, frozenset(params))
    query = _COMPILED.get(key)
    if query is None:
        query = _COMPILED[key] = DriverQuery(summary_rows_statement(selection, (), conn))
    return query.tuples(conn, params)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the lean pass. The pass makes no reference cycles,
    but it makes enough objects to set off full collections, each walking every long-lived
    object of the server process: measured at 100,000 rows, as long as the pass itself.

    The switch is process-wide, and the pass runs on a reader thread (``read_sync``), so other
    threads allocate with the collector off for as long (under a second at 100,000 rows);
    what cycles they make are collected once it is back on. Two passes at once may turn it
    back on before the later one ends (each restores what it found); it always ends on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _by_status(texts: Counter[str | None]) -> Counter[str]:
    total: Counter[str] = Counter()
    for text, n in texts.items():
        if text is not None:
            for status, count in json.loads(text).items():
                total[status] += count * n
    return total


def summarise_quickly(
    conn: Connection,
    selection: Selection,
    excluded: Collection[str],
    ignored: Collection[str],
) -> QuickSummary | None:
    """The selection's two files, or None when some row is stale or a rollout check ignored."""
    if any(check in BIT for check in ignored):
        return None
    with _collector_paused():
        return _summarised(_summary_rows(conn, selection, excluded), ignored)


def _summarised(fetched: Sequence[Any], ignored: Collection[str]) -> QuickSummary | None:
    count = len(fetched)
    if not count:
        return None
    # One tuple per column: the rows' tuples are freed at once (see lean_summary.py).
    task, rollout, stage, verdict, issue_counts, lines, by_status, fresh, packed = zip(
        *fetched, strict=True
    )
    del fetched
    if sum(fresh) != count:  # some record has no row as new as itself: not answered here
        return None
    figures = figure_columns(packed)
    if figures is None or None in lines:  # a positional rollout id, or a count beyond int64
        return None
    errors, duplicated = figures.model_call_errors, figures.duplicated_calls
    unobserved = Counter(figures.unobserved_mask)
    sums = RunSums(
        records=count,
        captures=sum(figures.capture_observed),
        unobserved={
            check: sum(n for mask, n in unobserved.items() if mask & BIT[check])
            for check in c.ROLLOUT_CHECKS
        },
        verdicts=Counter(),
        issues=Counter(),
        errors=sum(errors),
        by_status=_by_status(Counter(by_status)),
        affected=count - errors.count(0),
        ended=sum(figures.ended_on_error),
        replayed=sum(duplicated),
        replaying=count - duplicated.count(0),
        prompt=sum(figures.transcript_prompt_tokens),
        completion=sum(figures.transcript_completion_tokens),
        capture_prompt=sum(figures.capture_prompt_tokens),
        capture_completion=sum(figures.capture_completion_tokens),
    )
    columns = LeanColumns(
        task_index=task,
        rollout_index=rollout,
        stage_index=stage,
        verdict=verdict,
        issue_counts=issue_counts,
        lines=lines,
        verdict_at=figures.verdict_at,
        findings_end=figures.findings_end,
        policy_calls_observed=figures.policy_calls_observed,
        successful=figures.successful_model_calls,
    )
    summary, verdict_lines = summarise_lean(columns, sums, ignored)
    return QuickSummary(summary, verdict_lines, count)
