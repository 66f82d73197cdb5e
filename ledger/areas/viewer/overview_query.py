"""The run overview's SQL: one page of rollouts and the selection's summary.

Every row is the ``rollouts`` row joined by primary key to ``capture_state`` and
``observation_records`` (one row per rollout each), so a page reads ``limit`` rows by an index
whatever the size of the run when sorted by id, and one ordered scan otherwise. Paging is by
keyset (the last row's sort key and id), never by offset: page 500 costs what page 1 costs.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    case,
    func,
    literal,
    select,
    true,
    tuple_,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.captures.tables import capture_call_counts, capture_calls, capture_state
from ledger.areas.evidence.findings import CAPTURE_MISSING, CAPTURE_PENDING, LINEAGE_ROW_MISSING
from ledger.areas.evidence.queries import rollout_ids_with_finding
from ledger.areas.observations.tables import observation_records
from ledger.areas.viewer.health_triage import RunHealth, read_run_health
from ledger.areas.viewer.natural_sort import natural_key
from ledger.gym.ids import split_transport_rollout_id
from ledger.log.tables import rollouts

State = Literal["live", "retired"]
Direction = Literal["asc", "desc"]


def _call_sum(column: ColumnElement[Any]) -> ColumnElement[Any]:
    """The rollout's null-aware sum over its captured calls (Gym's aggregate: unknown stays
    NULL), correlated on the primary key: evaluated for the rows of the page only, unless the
    page is sorted by it."""
    return (
        select(func.sum(column))
        .where(capture_calls.c.rollout_id == rollouts.c.rollout_id)
        .where(capture_calls.c.generation == rollouts.c.generation)
        .correlate(rollouts)
        .scalar_subquery()
    )


TOKENS_IN = _call_sum(capture_calls.c.tokens_in)
TOKENS_OUT = _call_sum(capture_calls.c.tokens_out)
TOKENS_CACHED = _call_sum(capture_calls.c.cached_tokens)
TOKENS_REASONING = _call_sum(capture_calls.c.tokens_reasoning)
LATENCY = _call_sum(capture_calls.c.latency_total_ms)
# Wall clock: the first call's start to the last call's end, in seconds (not the sum of the
# calls' latencies, which counts parallel calls twice and misses the time between calls).
DURATION = (
    select(func.max(capture_calls.c.completed_at) - func.min(capture_calls.c.started_at))
    .where(capture_calls.c.rollout_id == rollouts.c.rollout_id)
    .where(capture_calls.c.generation == rollouts.c.generation)
    .correlate(rollouts)
    .scalar_subquery()
)

# The rollout's captured records: 0 for a rollout with capture state but no count row yet (a
# marker or pending calls only), NULL for one with no capture state at all.
CALLS = case(
    (
        capture_state.c.rollout_id.is_not(None),
        func.coalesce(capture_call_counts.c.record_count, 0),
    )
)

# Sort keys: NULLs sort as -1 so the keyset comparison is total (unknown sorts below zero).
SORTS: dict[str, ColumnElement[Any]] = {
    "id": rollouts.c.rollout_id,
    "natural": natural_key(rollouts.c.rollout_id),
    "generation": rollouts.c.generation,
    "last_event": rollouts.c.last_seq,
    "calls": func.coalesce(CALLS, -1),
    "tokens_in": func.coalesce(TOKENS_IN, -1),
    "tokens_out": func.coalesce(TOKENS_OUT, -1),
    "tokens_cached": func.coalesce(TOKENS_CACHED, -1),
    "tokens_reasoning": func.coalesce(TOKENS_REASONING, -1),
    "latency": func.coalesce(LATENCY, -1.0),
    "duration": func.coalesce(DURATION, -1.0),
    "gaps": func.coalesce(observation_records.c.gap_count, -1),
}
NUMERIC_SORTS = frozenset(SORTS) - {"id", "natural"}
PAGE_SIZES = (25, 50, 100, 200)


class InvalidOverviewQuery(ValueError):
    """A query parameter of /ui/ that is not acceptable (shown to the user as a 400)."""


@dataclass(frozen=True)
class OverviewFilter:
    id_glob: str | None = None
    state: State | None = None
    has_gap: bool | None = None
    verdict: str | None = None
    # The task id exactly, or containing this text (``%`` and ``_`` literal); resolved is
    # "yes", "no" or "unknown" (no result reported).
    task: str | None = None
    task_has: str | None = None
    resolved: str | None = None
    # A rollout check that found something (judged per page, like ``verdict``).
    check: str | None = None

    # "missing": a call of the rollout is named missing (its capture, or its lineage row);
    # "pending": a call is still within the grace window. Named against ``evidence_cutoff``,
    # which the route sets from the clock (docs/gym.md, "What the ledger reconciles").
    evidence: str | None = None
    evidence_cutoff: datetime | None = None


@dataclass(frozen=True)
class OverviewQuery:
    filter: OverviewFilter = field(default_factory=OverviewFilter)
    sort: str = "id"
    direction: Direction = "asc"
    limit: int = 50
    after: tuple[Any, str] | None = None


@dataclass(frozen=True)
class OverviewRow:
    rollout_id: str
    generation: int
    state: str
    last_seq: int
    updated_at: datetime
    calls: int | None
    pending: int | None
    incomplete: bool | None
    tokens_in: int | None
    tokens_out: int | None
    tokens_cached: int | None
    tokens_reasoning: int | None
    latency_ms: float | None
    gaps: int | None
    resolved: bool | None
    sort_key: Any
    task_id: str | None = None
    duration_s: float | None = None

    @property
    def attempt(self) -> int:
        """Gym's attempt (the ``-a<n>`` suffix; 0 without one)."""
        return split_transport_rollout_id(self.rollout_id)[1]


@dataclass(frozen=True)
class OverviewSummary:
    rollouts: int = 0
    live: int = 0
    retired: int = 0
    with_gaps: int = 0
    gaps: int = 0
    resolved: int = 0
    unresolved: int = 0
    incomplete: int = 0
    pending_calls: int = 0
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    tokens_reasoning: int = 0
    latency_ms: float = 0.0
    mean_coverage: float | None = None
    # Per task (``TASKS_SHOWN`` at most, by task id) and how many tasks the selection has.
    tasks: tuple[TaskRow, ...] = ()
    task_count: int = 0
    # The run-level health of the latest attempts (None: the health rules are not installed).
    health: RunHealth | None = None


TASKS_SHOWN = 50
NO_TASK = "(no task reported)"


@dataclass(frozen=True)
class TaskRow:
    """One task of the selection. ``rollouts`` counts every attempt; the rest is over the
    latest attempt of each rollout (a retried rollout counts once, as its last try)."""

    task: str
    rollouts: int
    latest: int
    resolved: int
    judged: int
    tokens: int
    p50_s: float | None
    p95_s: float | None
    # Latest attempts whose verdict is unhealthy (None: no health to count from).
    unhealthy: int | None = None


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _like_literal(text: str) -> str:
    return "".join("\\" + c if c in "%_\\" else c for c in text)


def glob_to_like(pattern: str) -> str:
    r"""``*`` any run, ``?`` one character; ``%``, ``_`` and ``\`` match themselves."""
    out = []
    for char in pattern:
        if char == "*":
            out.append("%")
        elif char == "?":
            out.append("_")
        elif char in "%_\\":
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def encode_cursor(sort_key: Any, rollout_id: str) -> str:
    raw = json.dumps([sort_key, rollout_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str, sort: str) -> tuple[Any, str]:
    """The (sort key, id) of ``after``; anything else is a 400, never a crash."""
    if len(text) > 1200:
        raise InvalidOverviewQuery("after: cursor too long")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        key, rollout_id = json.loads(raw)
    except (ValueError, TypeError):
        raise InvalidOverviewQuery("after: not a cursor from this page") from None
    expected: tuple[type, ...] = (int, float) if sort in NUMERIC_SORTS else (str,)
    if not isinstance(rollout_id, str) or isinstance(key, bool) or not isinstance(key, expected):
        raise InvalidOverviewQuery("after: not a cursor for this sort") from None
    return key, rollout_id


def _joined() -> Any:
    return (
        rollouts.outerjoin(capture_state, capture_state.c.rollout_id == rollouts.c.rollout_id)
        .outerjoin(capture_call_counts, capture_call_counts.c.rollout_id == rollouts.c.rollout_id)
        .outerjoin(observation_records, observation_records.c.rollout_id == rollouts.c.rollout_id)
    )


def _where(flt: OverviewFilter) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if flt.id_glob:
        conditions.append(rollouts.c.rollout_id.like(glob_to_like(flt.id_glob), escape="\\"))
    if flt.state is not None:
        conditions.append(rollouts.c.state == flt.state)
    if flt.has_gap is True:
        conditions.append(observation_records.c.gap_count > 0)
    elif flt.has_gap is False:
        conditions.append(func.coalesce(observation_records.c.gap_count, 0) == 0)
    if flt.task is not None:
        conditions.append(observation_records.c.task_id == flt.task)
    if flt.task_has:
        pattern = "%" + _like_literal(flt.task_has) + "%"
        conditions.append(observation_records.c.task_id.like(pattern, escape="\\"))
    if flt.resolved == "yes":
        conditions.append(observation_records.c.resolved.is_(True))
    elif flt.resolved == "no":
        conditions.append(observation_records.c.resolved.is_(False))
    elif flt.resolved == "unknown":
        conditions.append(observation_records.c.resolved.is_(None))
    if flt.evidence is not None:
        if flt.evidence_cutoff is None:
            raise ValueError("an evidence filter needs the window's cutoff")
        kinds = (
            [CAPTURE_MISSING, LINEAGE_ROW_MISSING]
            if flt.evidence == "missing"
            else [CAPTURE_PENDING]
        )
        ids = rollout_ids_with_finding(kinds, flt.evidence_cutoff)
        conditions.append(rollouts.c.rollout_id.in_(ids))
    return conditions


def page_statement(query: OverviewQuery) -> Select[Any]:
    key = SORTS[query.sort]
    conditions = _where(query.filter)
    if query.after is not None:
        after_key, after_id = query.after
        if query.sort == "id":
            conditions.append(
                rollouts.c.rollout_id > after_id
                if query.direction == "asc"
                else rollouts.c.rollout_id < after_id
            )
        else:
            pair = tuple_(key, rollouts.c.rollout_id)
            bound = tuple_(literal(after_key), literal(after_id))
            conditions.append(pair > bound if query.direction == "asc" else pair < bound)
    order = (
        [key.asc(), rollouts.c.rollout_id.asc()]
        if query.direction == "asc"
        else [key.desc(), rollouts.c.rollout_id.desc()]
    )
    if query.sort == "id":
        order = order[1:]
    return (
        select(
            rollouts.c.rollout_id,
            rollouts.c.generation,
            rollouts.c.state,
            rollouts.c.last_seq,
            rollouts.c.updated_at,
            CALLS.label("record_count"),
            capture_state.c.pending_count,
            capture_state.c.incomplete,
            TOKENS_IN.label("tokens_in"),
            TOKENS_OUT.label("tokens_out"),
            TOKENS_CACHED.label("tokens_cached"),
            TOKENS_REASONING.label("tokens_reasoning"),
            LATENCY.label("latency_ms"),
            observation_records.c.gap_count,
            observation_records.c.resolved,
            key.label("sort_key"),
            observation_records.c.task_id,
            DURATION.label("duration_s"),
        )
        .select_from(_joined())
        .where(and_(true(), *conditions))
        .order_by(*order)
        .limit(query.limit + 1)
    )


def summary_statement(flt: OverviewFilter) -> Select[Any]:
    gaps = observation_records.c.gap_count
    return (
        select(
            func.count(),
            func.sum(case((rollouts.c.state == "live", 1), else_=0)),
            func.sum(case((rollouts.c.state == "retired", 1), else_=0)),
            func.sum(case((gaps > 0, 1), else_=0)),
            func.sum(gaps),
            func.sum(case((observation_records.c.resolved.is_(True), 1), else_=0)),
            func.sum(case((observation_records.c.resolved.is_(False), 1), else_=0)),
            func.sum(case((capture_state.c.incomplete.is_(True), 1), else_=0)),
            func.sum(capture_state.c.pending_count),
            func.sum(CALLS),
            func.avg(observation_records.c.token_observability_coverage),
        )
        .select_from(_joined())
        .where(and_(true(), *_where(flt)))
    )


def call_sums_statement(flt: OverviewFilter) -> Select[Any]:
    """The selection's sums over every captured call of each rollout's current generation."""
    return (
        select(
            func.sum(capture_calls.c.tokens_in),
            func.sum(capture_calls.c.tokens_out),
            func.sum(capture_calls.c.cached_tokens),
            func.sum(capture_calls.c.tokens_reasoning),
            func.sum(capture_calls.c.latency_total_ms),
        )
        .select_from(
            _joined().join(
                capture_calls,
                and_(
                    capture_calls.c.rollout_id == rollouts.c.rollout_id,
                    capture_calls.c.generation == rollouts.c.generation,
                ),
            )
        )
        .where(and_(true(), *_where(flt)))
    )


@dataclass(frozen=True)
class OverviewPage:
    rows: list[OverviewRow]
    next_after: str | None


async def read_page(conn: AsyncConnection, query: OverviewQuery) -> OverviewPage:
    found = (await conn.execute(page_statement(query))).all()
    rows = [
        OverviewRow(
            rollout_id=r.rollout_id,
            generation=r.generation,
            state=r.state,
            last_seq=r.last_seq,
            updated_at=r.updated_at,
            calls=r.record_count,
            pending=r.pending_count,
            incomplete=r.incomplete,
            tokens_in=r.tokens_in,
            tokens_out=r.tokens_out,
            tokens_cached=r.tokens_cached,
            tokens_reasoning=r.tokens_reasoning,
            latency_ms=r.latency_ms,
            gaps=r.gap_count,
            resolved=r.resolved,
            sort_key=r.sort_key,
            task_id=r.task_id,
            duration_s=None if r.duration_s is None else float(r.duration_s),
        )
        for r in found[: query.limit]
    ]
    next_after = None
    if len(found) > query.limit and rows:
        next_after = encode_cursor(rows[-1].sort_key, rows[-1].rollout_id)
    return OverviewPage(rows=rows, next_after=next_after)


async def read_summary(
    conn: AsyncConnection, flt: OverviewFilter, *, with_health: bool = False
) -> OverviewSummary:
    r = (await conn.execute(summary_statement(flt))).one()
    sums = (await conn.execute(call_sums_statement(flt))).one()
    ints = [int(v or 0) for v in r[:10]] + [int(v or 0) for v in sums[:4]]
    names = [
        "rollouts",
        "live",
        "retired",
        "with_gaps",
        "gaps",
        "resolved",
        "unresolved",
        "incomplete",
        "pending_calls",
        "calls",
        "tokens_in",
        "tokens_out",
        "tokens_cached",
        "tokens_reasoning",
    ]
    health = await conn.run_sync(read_run_health, _where(flt), _joined()) if with_health else None
    tasks, task_count = await read_tasks(conn, flt, None if health is None else health.unhealthy)
    return OverviewSummary(
        **dict(zip(names, ints, strict=True)),
        latency_ms=float(sums[4] or 0.0),
        mean_coverage=None if r[10] is None else float(r[10]),
        tasks=tasks,
        task_count=task_count,
        health=health,
    )


def tasks_statement(flt: OverviewFilter) -> Select[Any]:
    """Each selected rollout's task, resolved, tokens and wall clock (one grouped pass over
    the calls of the current generations)."""
    per_rollout = (
        select(
            capture_calls.c.rollout_id,
            capture_calls.c.generation,
            (func.max(capture_calls.c.completed_at) - func.min(capture_calls.c.started_at)).label(
                "duration"
            ),
            func.coalesce(func.sum(capture_calls.c.tokens_in), 0).label("tin"),
            func.coalesce(func.sum(capture_calls.c.tokens_out), 0).label("tout"),
        )
        .group_by(capture_calls.c.rollout_id, capture_calls.c.generation)
        .subquery()
    )
    return (
        select(
            rollouts.c.rollout_id,
            observation_records.c.task_id,
            observation_records.c.resolved,
            per_rollout.c.duration,
            per_rollout.c.tin,
            per_rollout.c.tout,
        )
        .select_from(
            _joined().outerjoin(
                per_rollout,
                and_(
                    per_rollout.c.rollout_id == rollouts.c.rollout_id,
                    per_rollout.c.generation == rollouts.c.generation,
                ),
            )
        )
        .where(and_(true(), *_where(flt)))
    )


async def read_tasks(
    conn: AsyncConnection, flt: OverviewFilter, unhealthy: frozenset[str] | None = None
) -> tuple[tuple[TaskRow, ...], int]:
    """The selection's tasks (the first ``TASKS_SHOWN`` by task id) and how many there are;
    ``unhealthy``: the latest attempts judged unhealthy (health_triage.py)."""
    by_task: dict[str, list[Any]] = {}
    for row in (await conn.execute(tasks_statement(flt))).all():
        by_task.setdefault(row.task_id or NO_TASK, []).append(row)
    found = []
    for task in sorted(by_task)[:TASKS_SHOWN]:
        rows = by_task[task]
        latest: dict[str, tuple[int, Any]] = {}
        for row in rows:
            logical, attempt = split_transport_rollout_id(row.rollout_id)
            key = logical or row.rollout_id
            if key not in latest or attempt > latest[key][0]:
                latest[key] = (attempt, row)
        last = [row for _, row in latest.values()]
        durations = [float(r.duration) for r in last if r.duration is not None]
        found.append(
            TaskRow(
                task=task,
                rollouts=len(rows),
                latest=len(last),
                resolved=sum(1 for r in last if r.resolved is True),
                judged=sum(1 for r in last if r.resolved is not None),
                tokens=sum(int(r.tin or 0) + int(r.tout or 0) for r in rows),
                p50_s=_quantile(durations, 0.5),
                p95_s=_quantile(durations, 0.95),
                unhealthy=None
                if unhealthy is None
                else sum(1 for r in last if r.rollout_id in unhealthy),
            )
        )
    return tuple(found), len(by_task)
