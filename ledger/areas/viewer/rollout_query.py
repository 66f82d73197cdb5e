"""The rollout page's reads: one page of one rollout's current generation, in one snapshot.

Every statement is keyed by ``rollout_id`` (and generation), on primary keys or
``ix_events_rollout``, so the page costs the same in a run of ten rollouts or of a million.
The calls and the events are read a page at a time (keyset on ``call_index`` and ``seq``, at
most a page and one more row), and the tools, pending calls and ledger rows are capped, so a
rollout of 20,000 calls renders in the bytes and memory of a rollout of 100; what the page
states about the whole rollout (call counts, failed, truncated, tools per invocation) is
aggregated in SQL. Payloads are not read here: a call's request and response are read on
demand (``call_payload``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, case, func, not_, or_, select

from ledger.areas.captures.queries import load_state_and_counts
from ledger.areas.captures.tables import capture_calls, capture_pending
from ledger.areas.lineage.tables import lineage_rows
from ledger.areas.observations.tables import (
    observation_gaps,
    observation_records,
    observation_tool_calls,
)
from ledger.log.rollout_events import ROLLOUT_RETIRED
from ledger.log.tables import events, rollouts

# A page of the calls table (and of the timeline): ~1.5 KB of HTML per call.
CALLS_PER_PAGE = 100
# Findings about calls are shown at most 100 at a time; their calls are looked up together.
MAX_CALL_KEYS = 200
# A page of the events section, newest first by default: ``hash`` is stored after the
# payload, so each event read walks its payload's pages.
EVENTS_PER_PAGE = 100
# The other sections are not paged but capped (each says how many it does not show).
TOOLS_SHOWN = 500
PENDING_SHOWN = 100
MANIFEST_SHOWN = 1000
TRUNCATING_FINISH = ("length", "max_tokens", "max_output_tokens")


def call_failed(damaged: bool, error_category: str | None, status_code: int | None) -> bool:
    """A captured call that failed (what ``FAILED`` says in SQL)."""
    return damaged or error_category is not None or (status_code or 0) >= 400


def call_truncated(finish_reason: str | None, response_status: str | None) -> bool:
    """A captured call cut short (what ``TRUNCATED`` says in SQL)."""
    return finish_reason in TRUNCATING_FINISH or response_status == "incomplete"


class InvalidRolloutQuery(ValueError):
    """A bad query parameter of the rollout page (the message names it)."""


@dataclass(frozen=True)
class PageAt:
    """Which page: the calls from this call index on (None: from the first), the newest events
    recorded before this seq (None: the newest of all). Events page from the newest down, so
    the oldest page is the short one and no page repeats another's events."""

    calls_from: int | None = None
    events_before: int | None = None


@dataclass(frozen=True)
class Call:
    call_index: int
    seq: int
    damaged: bool
    model_call_id: str | None
    response_id: str | None
    model_ref_name: str | None
    model: str | None
    dialect: str | None
    status_code: int | None
    response_status: str | None
    finish_reason: str | None
    error_category: str | None
    started_at: float | None
    completed_at: float | None
    latency_ms: float | None
    ttft_ms: float | None
    tokens_in: int | None
    tokens_out: int | None
    tokens_reasoning: int | None
    tokens_total: int | None
    cached_tokens: int | None
    num_tool_calls: int | None

    @property
    def failed(self) -> bool:
        return call_failed(self.damaged, self.error_category, self.status_code)

    @property
    def truncated(self) -> bool:
        return call_truncated(self.finish_reason, self.response_status)


@dataclass(frozen=True)
class ToolCall:
    position: int
    invocation_id: str
    tool_call_id: str
    tool_name: str | None
    status: str
    started_at: float | None
    completed_at: float | None
    duration_ms: float | None
    error_type: str | None

    @property
    def duration(self) -> float | None:
        """Reported, else from the interval (as the ``rollout_tool_calls`` view)."""
        if self.duration_ms is not None:
            return self.duration_ms
        if self.started_at is not None and self.completed_at is not None:
            return (self.completed_at - self.started_at) * 1000
        return None

    @property
    def failed(self) -> bool:
        return self.status in {"failed", "timeout", "cancelled"} or self.error_type is not None

    @property
    def truncated(self) -> bool:
        """Cut short without failing: the tool's observation says it did not finish."""
        return not self.failed and self.status == "incomplete"


@dataclass(frozen=True)
class Gap:
    position: int
    document: str
    code: str
    invocation_id: str | None
    detail: str | None


@dataclass(frozen=True)
class Invocation:
    invocation_id: str
    parent_invocation_id: str | None
    spawned_by_tool_call_id: str | None
    status: str
    duration_ms: float | None
    error_type: str | None
    model_call_ids: tuple[str, ...]
    response_ids: tuple[str, ...]


@dataclass(frozen=True)
class ManifestRow:
    seq: int
    row_kind: str
    model_call_id: str
    failure_reason: str | None
    parent_call_id: str | None
    staging_key: str | None
    cum_len: int | None


@dataclass(frozen=True)
class EventLine:
    seq: int
    recorded_at: datetime
    kind: str
    generation: int
    hash: str


@dataclass
class RolloutDetail:
    rollout_id: str
    generation: int
    state: str
    first_seq: int
    last_seq: int
    created_at: datetime
    updated_at: datetime
    fenced_seq: int | None = None
    fenced_at: datetime | None = None
    incomplete: bool = False
    damaged_count: int = 0
    task_id: str | None = None
    resolved: bool | None = None
    coverage: float | None = None
    at: PageAt = field(default_factory=PageAt)
    # The page's calls (by call_index), the first index of the previous and of the next page.
    calls: list[Call] = field(default_factory=list)
    calls_previous: int | None = None
    calls_next: int | None = None
    # Over every call of the generation, not the page.
    call_count: int = 0
    failed_count: int = 0
    truncated_count: int = 0
    pending: list[str] = field(default_factory=list)
    pending_count: int = 0
    # All the tools when the calls fit on one page, else those overlapping the page's calls.
    tools: list[ToolCall] = field(default_factory=list)
    tools_of_page: bool = False
    tool_count: int = 0
    tools_per_invocation: dict[str, int] = field(default_factory=dict)
    gaps: list[Gap] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    manifest: list[ManifestRow] = field(default_factory=list)
    manifest_more: bool = False
    # The page's events (oldest first); the ``events_before`` of the older page (its first
    # seq) and of the newer one (0: the newest page).
    events: list[EventLine] = field(default_factory=list)
    events_older: int | None = None
    events_newer: int | None = None

    @property
    def paged(self) -> bool:
        """Whether the calls take more than one page."""
        return self.calls_previous is not None or self.calls_next is not None


def read_invocations(bundle: str | None, result: str | None) -> list[Invocation]:
    """The producer trajectory's invocations, then the observed ones not already listed."""
    raw: list[dict[str, Any]] = []
    if result:
        trajectory = json.loads(result).get("ng_trajectory") or {}
        raw.extend(trajectory.get("invocations") or [])
    if bundle:
        raw.extend(
            r
            for r in json.loads(bundle).get("records") or []
            if r.get("kind") == "agent_invocation"
        )
    seen: set[str] = set()
    found = []
    for item in raw:
        invocation_id = str(item.get("invocation_id"))
        if invocation_id in seen:
            continue
        seen.add(invocation_id)
        refs = item.get("model_calls") or []
        found.append(
            Invocation(
                invocation_id=invocation_id,
                parent_invocation_id=item.get("parent_invocation_id"),
                spawned_by_tool_call_id=item.get("spawned_by_tool_call_id"),
                status=str(item.get("status") or "unknown"),
                duration_ms=item.get("duration_ms"),
                error_type=item.get("error_type"),
                model_call_ids=tuple(r["model_call_id"] for r in refs if r.get("model_call_id")),
                response_ids=tuple(r["response_id"] for r in refs if r.get("response_id")),
            )
        )
    return found


CALL_COLUMNS = (
    capture_calls.c.call_index,
    capture_calls.c.seq,
    capture_calls.c.damaged,
    capture_calls.c.model_call_id,
    capture_calls.c.response_id,
    capture_calls.c.model_ref_name,
    capture_calls.c.model,
    capture_calls.c.dialect,
    capture_calls.c.status_code,
    capture_calls.c.response_status,
    capture_calls.c.finish_reason,
    capture_calls.c.error_category,
    capture_calls.c.started_at,
    capture_calls.c.completed_at,
    capture_calls.c.latency_total_ms,
    capture_calls.c.latency_ttft_ms,
    capture_calls.c.tokens_in,
    capture_calls.c.tokens_out,
    capture_calls.c.tokens_reasoning,
    capture_calls.c.tokens_total,
    capture_calls.c.cached_tokens,
    capture_calls.c.num_tool_calls,
)


# The SQL twins of ``Call.failed`` and ``Call.truncated`` (never NULL, so that they count).
FAILED = or_(
    capture_calls.c.damaged,
    capture_calls.c.error_category.is_not(None),
    func.coalesce(capture_calls.c.status_code, 0) >= 400,
)
TRUNCATED = or_(
    func.coalesce(capture_calls.c.finish_reason, "").in_(TRUNCATING_FINISH),
    func.coalesce(capture_calls.c.response_status, "") == "incomplete",
)


def count_of(condition: ColumnElement[bool]) -> ColumnElement[int]:
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def _read_calls(conn: Connection, detail: RolloutDetail, at: PageAt) -> None:
    """The page of calls from ``at.calls_from`` and the counts over all of them."""
    mine = and_(
        capture_calls.c.rollout_id == detail.rollout_id,
        capture_calls.c.generation == detail.generation,
    )
    start = at.calls_from or 0
    found = [
        Call(*r)
        for r in conn.execute(
            select(*CALL_COLUMNS)
            .where(mine, capture_calls.c.call_index >= start)
            .order_by(capture_calls.c.call_index)
            .limit(CALLS_PER_PAGE + 1)
        )
    ]
    detail.calls = found[:CALLS_PER_PAGE]
    if len(found) > CALLS_PER_PAGE:
        detail.calls_next = found[CALLS_PER_PAGE].call_index
    before = (
        select(capture_calls.c.call_index)
        .where(mine, capture_calls.c.call_index < start)
        .order_by(capture_calls.c.call_index.desc())
        .limit(CALLS_PER_PAGE)
        .subquery()
    )
    detail.calls_previous = conn.execute(select(func.min(before.c.call_index))).scalar()
    counts = conn.execute(
        select(func.count(), count_of(FAILED), count_of(and_(TRUNCATED, not_(FAILED))))
        .select_from(capture_calls)
        .where(mine)
    ).one()
    detail.call_count, detail.failed_count, detail.truncated_count = (int(n) for n in counts)


_TOOL_COLUMNS = (
    observation_tool_calls.c.position,
    observation_tool_calls.c.invocation_id,
    observation_tool_calls.c.tool_call_id,
    observation_tool_calls.c.tool_name,
    observation_tool_calls.c.status,
    observation_tool_calls.c.started_at,
    observation_tool_calls.c.completed_at,
    observation_tool_calls.c.duration_ms,
    observation_tool_calls.c.error_type,
)


def _read_tools(conn: Connection, detail: RolloutDetail) -> None:
    """Every tool when the calls fit on one page; else the tools whose interval overlaps the
    page's calls (those the page's timeline spans). Capped at ``TOOLS_SHOWN`` either way."""
    mine = and_(
        observation_tool_calls.c.rollout_id == detail.rollout_id,
        observation_tool_calls.c.generation == detail.generation,
    )
    per_invocation = conn.execute(
        select(observation_tool_calls.c.invocation_id, func.count())
        .where(mine)
        .group_by(observation_tool_calls.c.invocation_id)
    )
    detail.tools_per_invocation = {invocation: int(n) for invocation, n in per_invocation}
    detail.tool_count = sum(detail.tools_per_invocation.values())
    shown = select(*_TOOL_COLUMNS).where(mine)
    if detail.paged:
        detail.tools_of_page = True
        starts = [c.started_at for c in detail.calls if c.started_at is not None]
        ends = [c.completed_at for c in detail.calls if c.completed_at is not None]
        if not starts or not ends:
            return
        shown = shown.where(
            observation_tool_calls.c.started_at <= max(ends),
            observation_tool_calls.c.completed_at >= min(starts),
        )
    detail.tools = [
        ToolCall(*r)
        for r in conn.execute(shown.order_by(observation_tool_calls.c.position).limit(TOOLS_SHOWN))
    ]


def _read_events(conn: Connection, detail: RolloutDetail, at: PageAt) -> None:
    """The newest page of events before ``at.events_before`` (default: the newest page),
    oldest first. In ix_events_rollout's order (seq grows with generation): no sort step."""
    columns = (
        events.c.seq,
        events.c.recorded_at,
        events.c.kind,
        events.c.generation,
        events.c.hash,
    )
    mine = events.c.rollout_id == detail.rollout_id
    shown = select(*columns).where(mine)
    if at.events_before is not None:
        shown = shown.where(events.c.seq < at.events_before)
    found = conn.execute(
        shown.order_by(events.c.generation.desc(), events.c.seq.desc()).limit(EVENTS_PER_PAGE + 1)
    ).all()
    page = found[:EVENTS_PER_PAGE][::-1]
    detail.events = [EventLine(*r) for r in page]
    if len(found) > EVENTS_PER_PAGE:
        detail.events_older = page[0].seq
    if at.events_before is None:
        return
    # The newer page ends with the EVENTS_PER_PAGE-th event after this page, or is the newest.
    after = page[-1].seq if page else at.events_before - 1
    newer = conn.execute(
        select(events.c.seq)
        .where(mine, events.c.seq > after)
        .order_by(events.c.generation, events.c.seq)
        .limit(EVENTS_PER_PAGE + 1)
    ).all()
    if newer:
        detail.events_newer = (
            newer[EVENTS_PER_PAGE - 1].seq + 1 if len(newer) > EVENTS_PER_PAGE else 0
        )


def read_rollout(
    conn: Connection, rollout_id: str, at: PageAt | None = None
) -> RolloutDetail | None:
    at = at or PageAt()
    row = conn.execute(select(rollouts).where(rollouts.c.rollout_id == rollout_id)).first()
    if row is None:
        return None
    generation = row.generation
    detail = RolloutDetail(
        rollout_id=rollout_id,
        generation=generation,
        state=row.state,
        first_seq=row.first_seq,
        last_seq=row.last_seq,
        created_at=row.created_at,
        updated_at=row.updated_at,
        at=at,
    )
    state, counts = load_state_and_counts(conn, rollout_id, generation)
    detail.incomplete = state.incomplete
    detail.damaged_count = counts.damaged_count
    _read_calls(conn, detail, at)
    pending_of = and_(
        capture_pending.c.rollout_id == rollout_id, capture_pending.c.generation == generation
    )
    detail.pending = list(
        conn.execute(
            select(capture_pending.c.model_call_id)
            .where(pending_of)
            .order_by(capture_pending.c.announced_seq)
            .limit(PENDING_SHOWN)
        ).scalars()
    )
    detail.pending_count = int(
        conn.execute(select(func.count()).select_from(capture_pending).where(pending_of)).scalar()
        or 0
    )
    record = conn.execute(
        select(
            observation_records.c.bundle,
            observation_records.c.result,
            observation_records.c.task_id,
            observation_records.c.resolved,
            observation_records.c.token_observability_coverage,
        ).where(
            observation_records.c.rollout_id == rollout_id,
            observation_records.c.generation == generation,
        )
    ).first()
    if record is not None:
        detail.task_id = record.task_id
        detail.resolved = record.resolved
        detail.coverage = record.token_observability_coverage
        detail.invocations = read_invocations(record.bundle, record.result)
    _read_tools(conn, detail)
    detail.gaps = [
        Gap(*r)
        for r in conn.execute(
            select(
                observation_gaps.c.position,
                observation_gaps.c.document,
                observation_gaps.c.code,
                observation_gaps.c.invocation_id,
                observation_gaps.c.detail,
            )
            .where(observation_gaps.c.rollout_id == rollout_id)
            .where(observation_gaps.c.generation == generation)
            .order_by(observation_gaps.c.position)
        )
    ]
    manifest = [
        ManifestRow(*r)
        for r in conn.execute(
            select(
                lineage_rows.c.seq,
                lineage_rows.c.row_kind,
                lineage_rows.c.model_call_id,
                lineage_rows.c.failure_reason,
                lineage_rows.c.parent_call_id,
                lineage_rows.c.staging_key,
                lineage_rows.c.cum_len,
            )
            .where(lineage_rows.c.rollout_id == rollout_id)
            .where(lineage_rows.c.generation == generation)
            .order_by(lineage_rows.c.seq)
            .limit(MANIFEST_SHOWN + 1)
        )
    ]
    detail.manifest = manifest[:MANIFEST_SHOWN]
    detail.manifest_more = len(manifest) > MANIFEST_SHOWN
    if detail.state == "retired":
        fence = conn.execute(
            select(events.c.seq, events.c.recorded_at)
            .where(events.c.rollout_id == rollout_id, events.c.generation == generation)
            .where(events.c.kind == ROLLOUT_RETIRED)
            .order_by(events.c.seq)
            .limit(1)
        ).first()
        if fence is not None:
            detail.fenced_seq, detail.fenced_at = fence.seq, fence.recorded_at
    _read_events(conn, detail, at)
    return detail


@dataclass(frozen=True)
class CallPayload:
    call_index: int
    request: Any
    response: Any
    redacted: bool


def read_call_payload(conn: Connection, rollout_id: str, call_index: int) -> CallPayload | None:
    """The captured exchange's request and response (from the event: stored once)."""
    found = conn.execute(
        select(events.c.payload)
        .select_from(
            capture_calls.join(rollouts, rollouts.c.rollout_id == capture_calls.c.rollout_id)
        )
        .join(events, events.c.seq == capture_calls.c.seq)
        .where(capture_calls.c.rollout_id == rollout_id)
        .where(capture_calls.c.generation == rollouts.c.generation)
        .where(capture_calls.c.call_index == call_index)
    ).first()
    if found is None:
        return None
    if found.payload is None:
        return CallPayload(call_index, None, None, redacted=True)
    payload = json.loads(found.payload)
    exchange = payload.get("exchange") if isinstance(payload, dict) else None
    if not isinstance(exchange, dict):
        # A damaged line: show what was captured as it is.
        return CallPayload(call_index, payload, None, redacted=False)
    return CallPayload(call_index, exchange.get("request"), exchange.get("response"), False)


def call_indexes(
    conn: Connection, rollout_id: str, generation: int, keys: Sequence[str]
) -> dict[str, int]:
    """The call index of each key (a model_call_id, else a response_id, as a health finding's
    locator names a call) among the rollout's captured calls of this generation: the findings
    about calls on other pages link to them. The first call wins for a key held twice."""
    found: dict[str, int] = {}
    wanted = list(dict.fromkeys(keys))[:MAX_CALL_KEYS]
    if not wanted:
        return found
    mine = and_(capture_calls.c.rollout_id == rollout_id, capture_calls.c.generation == generation)
    for column in (capture_calls.c.model_call_id, capture_calls.c.response_id):
        rows = conn.execute(
            select(column, func.min(capture_calls.c.call_index))
            .where(mine, column.in_(wanted))
            .group_by(column)
        )
        for key, index in rows:
            found.setdefault(str(key), int(index))
    return found
