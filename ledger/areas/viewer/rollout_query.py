"""The rollout page's reads: everything about one rollout's current generation, in one snapshot.

Every statement is keyed by ``rollout_id`` (and generation), on primary keys or
``ix_events_rollout``, so the page costs the same in a run of ten rollouts or of a million.
Payloads are not read here: a call's request and response are read on demand (``call_payload``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from ledger.areas.captures.tables import capture_calls, capture_pending, capture_state
from ledger.areas.lineage.tables import lineage_rows
from ledger.areas.observations.tables import (
    observation_gaps,
    observation_records,
    observation_tool_calls,
)
from ledger.log.rollout_events import ROLLOUT_RETIRED
from ledger.log.tables import events, rollouts

# The events section shows the newest this many (the JSON /v1/events pages through the rest):
# ``hash`` is stored after the payload, so each event read walks its payload's pages.
EVENTS_SHOWN = 100
MANIFEST_SHOWN = 1000


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
        return self.damaged or self.error_category is not None or (self.status_code or 0) >= 400

    @property
    def truncated(self) -> bool:
        return self.finish_reason in {"length", "max_tokens", "max_output_tokens"} or (
            self.response_status == "incomplete"
        )


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
    calls: list[Call] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    tools: list[ToolCall] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    manifest: list[ManifestRow] = field(default_factory=list)
    events: list[EventLine] = field(default_factory=list)
    event_count: int = 0


def _invocations(bundle: str | None, result: str | None) -> list[Invocation]:
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


_CALL_COLUMNS = (
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


def read_rollout(conn: Connection, rollout_id: str) -> RolloutDetail | None:
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
    )
    state = conn.execute(
        select(capture_state.c.incomplete, capture_state.c.damaged_count).where(
            capture_state.c.rollout_id == rollout_id, capture_state.c.generation == generation
        )
    ).first()
    if state is not None:
        detail.incomplete = bool(state.incomplete)
        detail.damaged_count = state.damaged_count
    detail.calls = [
        Call(*r)
        for r in conn.execute(
            select(*_CALL_COLUMNS)
            .where(capture_calls.c.rollout_id == rollout_id)
            .where(capture_calls.c.generation == generation)
            .order_by(capture_calls.c.call_index)
        )
    ]
    detail.pending = list(
        conn.execute(
            select(capture_pending.c.model_call_id)
            .where(capture_pending.c.rollout_id == rollout_id)
            .where(capture_pending.c.generation == generation)
            .order_by(capture_pending.c.announced_seq)
        ).scalars()
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
        detail.invocations = _invocations(record.bundle, record.result)
    detail.tools = [
        ToolCall(*r)
        for r in conn.execute(
            select(
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
            .where(observation_tool_calls.c.rollout_id == rollout_id)
            .where(observation_tool_calls.c.generation == generation)
            .order_by(observation_tool_calls.c.position)
        )
    ]
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
    detail.manifest = [
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
            .limit(MANIFEST_SHOWN)
        )
    ]
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
    newest = conn.execute(
        select(
            events.c.seq, events.c.recorded_at, events.c.kind, events.c.generation, events.c.hash
        )
        .where(events.c.rollout_id == rollout_id)
        # In ix_events_rollout's order (seq grows with generation): no sort step.
        .order_by(events.c.generation.desc(), events.c.seq.desc())
        .limit(EVENTS_SHOWN + 1)
    ).all()
    detail.event_count = len(newest)
    detail.events = [EventLine(*r) for r in reversed(newest[:EVENTS_SHOWN])]
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
