"""The compare page's reads: each rollout's summary, a window of its calls, the scan for the
first difference between two transcripts, and the rollouts of one task.

Bounded per request: the calls table shows ``COMPARE_CALLS`` calls from ``calls_from`` (by the
primary key, as the rollout page does, without payloads), and the scan reads payloads in
batches (``SCAN_BATCHES`` calls per side: a small one first, since samples of one task mostly
part early), stopping at the first difference and after ``COMPARE_SCAN`` calls at most (the
page then links to the next window). Reading and parsing payloads is the cost: a late call's
request carries the whole conversation so far. The task view compares each rollout
with the first over its first ``TASK_SCAN_CALLS`` calls only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy import Connection, and_, func, select

from ledger.areas.captures.tables import capture_calls
from ledger.areas.observations.tables import observation_records
from ledger.areas.viewer.divergence import Difference, first_difference
from ledger.areas.viewer.natural_sort import natural_key
from ledger.areas.viewer.rollout_query import (
    CALL_COLUMNS,
    FAILED,
    TRUNCATED,
    Call,
    Invocation,
    count_of,
    read_invocations,
)
from ledger.areas.viewer.transcript_page import Turn, thread_turns
from ledger.areas.viewer.transcript_query import (
    CallWithPayload,
    TranscriptData,
    read_calls_with_payload,
)
from ledger.gym.ids import split_transport_rollout_id
from ledger.log.tables import rollouts

COMPARE_CALLS = 100
SCAN_BATCHES = (5, 20)
COMPARE_SCAN = sum(SCAN_BATCHES)
TASK_SHOWN = 50
TASK_SCAN_CALLS = 8
ATTEMPTS_SHOWN = 20


class InvalidCompareQuery(ValueError):
    """A parameter of /ui/compare that is not acceptable (a 400 naming it)."""


@dataclass
class RolloutSummary:
    rollout_id: str
    generation: int
    state: str
    last_seq: int
    task_id: str | None = None
    resolved: bool | None = None
    calls: int = 0
    failed: int = 0
    truncated: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cached: int | None = None
    tokens_reasoning: int | None = None
    latency_ms: float | None = None
    duration_s: float | None = None
    invocations: list[Invocation] = field(default_factory=list)

    @property
    def attempt(self) -> int:
        return split_transport_rollout_id(self.rollout_id)[1]


def read_summary(conn: Connection, rollout_id: str) -> RolloutSummary | None:
    """The rollout's facts and its current generation's call aggregates (one indexed read
    each: the rollout row, its record, its calls by the primary key prefix)."""
    row = conn.execute(
        select(rollouts.c.generation, rollouts.c.state, rollouts.c.last_seq).where(
            rollouts.c.rollout_id == rollout_id
        )
    ).first()
    if row is None:
        return None
    found = RolloutSummary(rollout_id, row.generation, row.state, row.last_seq)
    totals = conn.execute(
        select(
            func.count(),
            count_of(FAILED),
            count_of(and_(TRUNCATED, ~FAILED)),
            func.sum(capture_calls.c.tokens_in),
            func.sum(capture_calls.c.tokens_out),
            func.sum(capture_calls.c.cached_tokens),
            func.sum(capture_calls.c.tokens_reasoning),
            func.sum(capture_calls.c.latency_total_ms),
            func.max(capture_calls.c.completed_at) - func.min(capture_calls.c.started_at),
        ).where(
            capture_calls.c.rollout_id == rollout_id, capture_calls.c.generation == row.generation
        )
    ).one()
    found.calls, found.failed, found.truncated = (int(n or 0) for n in totals[:3])
    (
        found.tokens_in,
        found.tokens_out,
        found.tokens_cached,
        found.tokens_reasoning,
        found.latency_ms,
        found.duration_s,
    ) = totals[3:]
    record = conn.execute(
        select(
            observation_records.c.task_id,
            observation_records.c.resolved,
            observation_records.c.bundle,
            observation_records.c.result,
        ).where(
            observation_records.c.rollout_id == rollout_id,
            observation_records.c.generation == row.generation,
        )
    ).first()
    if record is not None:
        found.task_id, found.resolved = record.task_id, record.resolved
        found.invocations = read_invocations(record.bundle, record.result)
    return found


def read_calls(
    conn: Connection, summary: RolloutSummary, calls_from: int, limit: int
) -> list[Call]:
    """Up to ``limit`` calls from ``calls_from``, without payloads."""
    return [
        Call(*r)
        for r in conn.execute(
            select(*CALL_COLUMNS)
            .where(
                capture_calls.c.rollout_id == summary.rollout_id,
                capture_calls.c.generation == summary.generation,
                capture_calls.c.call_index >= calls_from,
            )
            .order_by(capture_calls.c.call_index)
            .limit(limit)
        )
    ]


class TurnReader:
    """One rollout's turns, batch after batch from ``calls_from``, each batch continuing the
    last call of the one before (so the threading is the transcript tab's)."""

    def __init__(self, conn: Connection, summary: RolloutSummary, calls_from: int) -> None:
        self._conn = conn
        self._summary = summary
        self._next = calls_from
        self._before: CallWithPayload | None = None
        self._first = True
        self.ended = False

    def read(self, limit: int) -> list[Turn]:
        if self.ended:
            return []
        calls, before = read_calls_with_payload(
            self._conn,
            self._summary.rollout_id,
            self._summary.generation,
            self._next,
            limit,
            with_before=self._first,  # later batches continue the last call read
        )
        if self._first:
            self._before, self._first = before, False
        self.ended = len(calls) < limit
        if not calls:
            return []
        data = TranscriptData(
            self._summary.rollout_id,
            self._summary.generation,
            calls=calls,
            before=self._before,
            invocations=self._summary.invocations,
        )
        turns = thread_turns(data)
        self._before = calls[-1]
        self._next = calls[-1].call.call_index + 1
        return turns[1:] if data.before is not None else turns


@dataclass
class Scan:
    """What the scan found: the first difference (with both sides' turns there, when they
    have one), or how far the transcripts agree."""

    calls_from: int
    difference: Difference | None = None
    turn_a: Turn | None = None
    turn_b: Turn | None = None
    # The last call index both have and agree on (None: none compared).
    agreed_to: int | None = None
    # Both transcripts ended within the window (no difference: they are the same).
    ended: bool = False
    # Where the next window starts, when the scan stopped at its bound.
    next_from: int | None = None


def _batches(limit: int) -> Iterator[int]:
    """``SCAN_BATCHES``, then its last size again, up to ``limit`` calls in all."""
    read, sizes = 0, iter(SCAN_BATCHES)
    while read < limit:
        size = min(next(sizes, SCAN_BATCHES[-1]), limit - read)
        read += size
        yield size


def scan(
    conn: Connection, a: RolloutSummary, b: RolloutSummary, calls_from: int, limit: int
) -> Scan:
    """The first difference from ``calls_from``, reading at most ``limit`` calls per side."""
    found = Scan(calls_from)
    left, right = TurnReader(conn, a, calls_from), TurnReader(conn, b, calls_from)
    for batch in _batches(limit):
        ta, tb = left.read(batch), right.read(batch)
        difference = first_difference(ta, tb, a_ends=left.ended, b_ends=right.ended)
        if difference is not None:
            found.difference = difference
            if difference.call_index > calls_from:  # every call before it agreed
                found.agreed_to = difference.call_index - 1
            found.turn_a = _at(ta, difference.call_index)
            found.turn_b = _at(tb, difference.call_index)
            return found
        if ta:
            found.agreed_to = ta[-1].item.call.call_index
        if left.ended and right.ended:
            found.ended = True
            return found
    found.next_from = (found.agreed_to if found.agreed_to is not None else calls_from - 1) + 1
    return found


def _at(turns: list[Turn], call_index: int) -> Turn | None:
    return next((t for t in turns if t.item.call.call_index == call_index), None)


@dataclass
class TaskRollout:
    summary: RolloutSummary
    # Against the first rollout of the task (None for the first itself).
    scan: Scan | None = None


@dataclass
class TaskView:
    task_id: str
    rollouts: list[TaskRollout]
    more: bool


def _task_ids(conn: Connection, task_id: str, limit: int) -> list[str]:
    return list(
        conn.execute(
            select(rollouts.c.rollout_id)
            .select_from(
                rollouts.join(
                    observation_records,
                    observation_records.c.rollout_id == rollouts.c.rollout_id,
                )
            )
            .where(
                observation_records.c.task_id == task_id,
                observation_records.c.generation == rollouts.c.generation,
            )
            .order_by(natural_key(rollouts.c.rollout_id), rollouts.c.rollout_id)
            .limit(limit)
        ).scalars()
    )


def read_task(conn: Connection, task_id: str) -> TaskView | None:
    """The task's rollouts (``TASK_SHOWN`` at most, by their numbers), each compared with the
    first over ``TASK_SCAN_CALLS`` calls; None when no rollout reported this task."""
    ids = _task_ids(conn, task_id, TASK_SHOWN + 1)
    if not ids:
        return None
    view = TaskView(task_id, [], more=len(ids) > TASK_SHOWN)
    for rollout_id in ids[:TASK_SHOWN]:
        summary = read_summary(conn, rollout_id)
        if summary is not None:
            view.rollouts.append(TaskRollout(summary))
    if view.rollouts:
        first = view.rollouts[0].summary
        for other in view.rollouts[1:]:
            other.scan = scan(conn, first, other.summary, 0, TASK_SCAN_CALLS)
    return view


def read_attempts(conn: Connection, rollout_id: str, task_id: str | None) -> list[str]:
    """The other rollouts of the same task, ``ATTEMPTS_SHOWN + 1`` at most, by their numbers
    (a rollout without a reported task has its logical id as task, so its retries are there)."""
    if task_id is None:
        return []
    ids = _task_ids(conn, task_id, ATTEMPTS_SHOWN + 2)
    return [found for found in ids if found != rollout_id][: ATTEMPTS_SHOWN + 1]
