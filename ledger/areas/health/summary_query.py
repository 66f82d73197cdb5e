"""A selection's quality summary from ``health_findings`` in two statements: the sums that do not
depend on position, added up by the database, then the narrow columns the per-rollout parts
need, in export order (``lean_summary.summarise_lean``).

It answers when every selected record has a fresh row and no rollout check is ignored; else it
returns None and the caller puts the rows through ``compact.summarise`` (stale ones checked on
read). Both statements are plain scans in index order: no window, sort or ``GROUP BY`` (SQLite
sorts for each, which costs more than the Python they would replace).
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.health.queries import restricted
from ledger.areas.health.selection import Selection
from ledger.areas.health.tables import health_findings as hf
from ledger.areas.observations.tables import observation_records as records
from ledger.gym.health import catalogue as c
from ledger.gym.health.compact import BIT, RunSums
from ledger.gym.health.lean_summary import LeanColumns, summarise_lean


@dataclass(frozen=True)
class QuickSummary:
    summary: dict[str, Any]  # quality_summary.json
    lines: list[bytes]  # rollout_verdicts.jsonl, in Gym's order
    records: int  # rows summarised (the selection less the excluded attempts)


def _flag(condition: ColumnElement[bool]) -> ColumnElement[int]:
    return case((condition, 1), else_=0)


def _over_selection(
    query: Select[Any], selection: Selection, excluded: Collection[str], conn: AsyncConnection
) -> Select[Any]:
    query = restricted(query, selection, conn, with_findings=True)
    if excluded:
        query = query.where(records.c.rollout_id.not_in(sorted(excluded)))
    return query


def sums_statement(
    selection: Selection, excluded: Collection[str], conn: AsyncConnection
) -> Select[Any]:
    """One row: how many records, how many without a fresh row, and the stats' sums."""
    query = select(
        func.count(),
        func.sum(_flag(func.coalesce(hf.c.last_seq, -1) != records.c.last_seq)),
        func.sum(_flag(hf.c.capture_observed)),
        func.sum(hf.c.model_call_errors),
        func.sum(_flag(hf.c.model_call_errors > 0)),
        func.sum(_flag(hf.c.ended_on_error)),
        func.sum(hf.c.duplicated_calls),
        func.sum(_flag(hf.c.duplicated_calls > 0)),
        func.sum(hf.c.transcript_prompt_tokens),
        func.sum(hf.c.transcript_completion_tokens),
        func.sum(hf.c.capture_prompt_tokens),
        func.sum(hf.c.capture_completion_tokens),
        *(
            func.sum(_flag(hf.c.unobserved_mask.op("&")(BIT[check]) != 0))
            for check in c.ROLLOUT_CHECKS
        ),
    )
    return _over_selection(query, selection, excluded, conn)


def rows_statement(
    selection: Selection, excluded: Collection[str], conn: AsyncConnection
) -> Select[Any]:
    """Per selected record in export order: its row's ``LeanColumns`` and failed-call
    statuses (the one JSON sum left to Python)."""
    query = select(
        hf.c.task_index,
        hf.c.rollout_index,
        hf.c.stage_index,
        hf.c.verdict_rollout_id,
        hf.c.verdict,
        hf.c.findings,
        hf.c.unobserved,
        hf.c.issue_counts,
        _flag(hf.c.policy_calls_observed),
        _flag(hf.c.successful_model_calls > 0),
        hf.c.errors_by_status,
    ).order_by(records.c.last_seq)
    return _over_selection(query, selection, excluded, conn)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a synchronous stretch (no await inside, so no
    other request runs meanwhile). The pass makes no reference cycles, but it makes enough
    objects to set off full collections, each walking every long-lived object of the server
    process: measured at 100,000 rows, as long as the pass itself."""
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


async def summarise_quickly(
    conn: AsyncConnection,
    selection: Selection,
    excluded: Collection[str],
    ignored: Collection[str],
) -> QuickSummary | None:
    """The selection's two files, or None when some row is stale or a rollout check ignored."""
    if any(check in BIT for check in ignored):
        return None
    totals = (await conn.execute(sums_statement(selection, excluded, conn))).one()
    count, stale, *figures = (int(value or 0) for value in totals)
    if not count or stale:
        return None
    result = await conn.execute(rows_statement(selection, excluded, conn))
    with _collector_paused():
        return _summarised(result.tuples().all(), count, figures, ignored)


def _summarised(
    fetched: Sequence[Any], count: int, figures: list[int], ignored: Collection[str]
) -> QuickSummary | None:
    if len(fetched) != count:  # cannot happen in one snapshot; never answer from a mismatch
        return None
    # One tuple per column: the rows' tuples are freed at once (see lean_summary.py).
    columns = list(zip(*fetched, strict=True))
    del fetched
    rows = LeanColumns(*columns[:10])
    sums = RunSums(
        records=count,
        captures=figures[0],
        unobserved=dict(zip(c.ROLLOUT_CHECKS, figures[10:], strict=True)),
        verdicts=Counter(),
        issues=Counter(),
        errors=figures[1],
        by_status=_by_status(Counter(columns[10])),
        affected=figures[2],
        ended=figures[3],
        replayed=figures[4],
        replaying=figures[5],
        prompt=figures[6],
        completion=figures[7],
        capture_prompt=figures[8],
        capture_completion=figures[9],
    )
    summary, lines = summarise_lean(rows, sums, ignored)
    return QuickSummary(summary, lines, count)
