"""The transcript page's reads: one page of a rollout's calls with their captured payloads,
the call before the page (what its first request continues), the invocations and, when a
producer gave them, the invocations' conversations and ``ng_trajectory`` turns.

Keyed like the rollout page (``rollout_id``, generation, ``call_index`` keyset): a page costs
the same in a rollout of 100 calls or of 20,000. The producer's conversations and turns are
capped (``PRODUCER_ITEMS``) and read on the first page only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, and_, func, select

from ledger.areas.captures.tables import capture_calls
from ledger.areas.observations.tables import observation_records
from ledger.areas.viewer.rollout_query import (
    CALL_COLUMNS,
    CALLS_PER_PAGE,
    Call,
    Invocation,
    read_invocations,
)
from ledger.areas.viewer.shared_history import HistoryParser
from ledger.log.tables import events, rollouts

# Items of the producer's conversations, and turns, shown at most (each section says so).
PRODUCER_ITEMS = 200


@dataclass(frozen=True)
class Exchange:
    """A call's request and response as captured (``None`` when redacted or damaged)."""

    request: Any
    response: Any
    response_raw: Any
    redacted: bool = False


@dataclass(frozen=True)
class CallWithPayload:
    call: Call
    exchange: Exchange


@dataclass
class TranscriptData:
    rollout_id: str
    generation: int
    task_id: str | None = None
    calls: list[CallWithPayload] = field(default_factory=list)
    before: CallWithPayload | None = None
    calls_previous: int | None = None
    calls_next: int | None = None
    call_count: int = 0
    calls_from: int = 0
    invocations: list[Invocation] = field(default_factory=list)
    # (invocation id, its conversation items) of the producer, capped; how many in all.
    conversations: list[tuple[str, list[Any]]] = field(default_factory=list)
    conversation_items: int = 0
    turns: list[dict[str, Any]] = field(default_factory=list)
    turn_count: int = 0


def _exchange(payload: str | None, parser: HistoryParser) -> Exchange:
    if payload is None:
        return Exchange(None, None, None, redacted=True)
    found = parser.parse(payload)
    exchange = found.get("exchange") if isinstance(found, dict) else None
    if not isinstance(exchange, dict):
        return Exchange(None, None, found)
    return Exchange(exchange.get("request"), exchange.get("response"), exchange.get("response_raw"))


def _producer(data: TranscriptData, bundle: str | None, result: str | None) -> None:
    """The invocations' conversations (observations, then the producer trajectory) and the
    trajectory's turns, each capped at ``PRODUCER_ITEMS``."""
    invocations: list[dict[str, Any]] = []
    trajectory: dict[str, Any] = {}
    if bundle:
        invocations.extend(
            r
            for r in json.loads(bundle).get("records") or []
            if isinstance(r, dict) and r.get("kind") == "agent_invocation"
        )
    if result:
        found = json.loads(result).get("ng_trajectory")
        trajectory = found if isinstance(found, dict) else {}
        invocations.extend(i for i in trajectory.get("invocations") or [] if isinstance(i, dict))
    seen: set[str] = set()
    budget = PRODUCER_ITEMS
    for inv in invocations:
        conversation = inv.get("conversation")
        invocation_id = str(inv.get("invocation_id"))
        if not isinstance(conversation, list) or not conversation or invocation_id in seen:
            continue
        seen.add(invocation_id)
        data.conversation_items += len(conversation)
        if budget > 0:
            data.conversations.append((invocation_id, conversation[:budget]))
            budget -= min(budget, len(conversation))
    turns = [t for t in trajectory.get("turns") or [] if isinstance(t, dict)]
    data.turn_count = len(turns)
    data.turns = turns[:PRODUCER_ITEMS]


def read_calls_with_payload(
    conn: Connection,
    rollout_id: str,
    generation: int,
    calls_from: int,
    limit: int,
    *,
    with_before: bool = True,
) -> tuple[list[CallWithPayload], CallWithPayload | None]:
    """Up to ``limit`` calls from ``calls_from`` with their payloads, and (``with_before``) the
    call before them, what the first one's request continues; by the primary key."""
    mine = and_(capture_calls.c.rollout_id == rollout_id, capture_calls.c.generation == generation)
    with_payload = (
        select(*CALL_COLUMNS, events.c.payload)
        .select_from(capture_calls.join(events, events.c.seq == capture_calls.c.seq))
        .where(mine)
    )
    found = conn.execute(
        with_payload.where(capture_calls.c.call_index >= calls_from)
        .order_by(capture_calls.c.call_index)
        .limit(limit)
    ).all()
    before = (
        conn.execute(
            with_payload.where(capture_calls.c.call_index < calls_from)
            .order_by(capture_calls.c.call_index.desc())
            .limit(1)
        ).first()
        if with_before
        else None
    )
    # One parser, the call before first: each request usually continues the one before it, and
    # the parser reuses the history they share (shared_history.py).
    parser = HistoryParser()
    earlier = (
        None
        if before is None
        else CallWithPayload(Call(*before[:-1]), _exchange(before[-1], parser))
    )
    return [CallWithPayload(Call(*r[:-1]), _exchange(r[-1], parser)) for r in found], earlier


def read_transcript(
    conn: Connection, rollout_id: str, calls_from: int | None
) -> TranscriptData | None:
    row = conn.execute(
        select(rollouts.c.generation).where(rollouts.c.rollout_id == rollout_id)
    ).first()
    if row is None:
        return None
    data = TranscriptData(rollout_id, row.generation, calls_from=calls_from or 0)
    mine = and_(
        capture_calls.c.rollout_id == rollout_id, capture_calls.c.generation == row.generation
    )
    data.calls, before = read_calls_with_payload(
        conn, rollout_id, row.generation, data.calls_from, CALLS_PER_PAGE
    )
    if data.calls:
        # The call after the page only says there is a next page: its payload is not read.
        data.calls_next = conn.execute(
            select(capture_calls.c.call_index)
            .where(mine, capture_calls.c.call_index > data.calls[-1].call.call_index)
            .order_by(capture_calls.c.call_index)
            .limit(1)
        ).scalar()
    if before is not None:
        data.before = before
        earlier = (
            select(capture_calls.c.call_index)
            .where(mine, capture_calls.c.call_index < data.calls_from)
            .order_by(capture_calls.c.call_index.desc())
            .limit(CALLS_PER_PAGE)
            .subquery()
        )
        data.calls_previous = conn.execute(select(func.min(earlier.c.call_index))).scalar()
    data.call_count = int(
        conn.execute(select(func.count()).select_from(capture_calls).where(mine)).scalar() or 0
    )
    record = conn.execute(
        select(
            observation_records.c.bundle,
            observation_records.c.result,
            observation_records.c.task_id,
        ).where(
            observation_records.c.rollout_id == rollout_id,
            observation_records.c.generation == row.generation,
        )
    ).first()
    if record is not None:
        data.task_id = record.task_id
        data.invocations = read_invocations(record.bundle, record.result)
        if data.calls_from == 0:
            _producer(data, record.bundle, record.result)
    return data
