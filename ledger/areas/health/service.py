"""Run-level answers over the stored records: one rollout's health, the quality summary and
the verdict lines of a selection, its perf summary, each in one snapshot.

Freshness rule: a rollout's ``health_findings`` row is used only when its ``last_seq`` equals
its record's (the follower computed it from that very record); a missing or stale row is
computed on read from the record. So an answer is never older than the records it reads,
however far behind the follower is; the rows only make it fast."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection

from ledger.areas.health import findings_store, queries
from ledger.areas.health.selection import Selection, superseded_attempts
from ledger.areas.health.summary_query import summarise_quickly
from ledger.gym.health.catalogue import UnknownCheck, normalize_ignored_checks
from ledger.gym.health.compact import (
    CompactDigest,
    compact_digest,
    rollout_outcome,
    summarise,
)
from ledger.gym.health.summary import summary_bytes
from ledger.gym.ids import validate_rollout_id
from ledger.gym.perf_summary import perf_summary
from ledger.log.canonical import parse_json
from ledger.log.errors import BadRequest, NotFound

T = TypeVar("T")


def ignored_checks(values: Sequence[str]) -> tuple[str, ...]:
    try:
        return normalize_ignored_checks(list(values))
    except UnknownCheck as exc:
        raise BadRequest(str(exc)) from None


@dataclass(frozen=True)
class SelectionCounts:
    """How many rollouts the selection matched, and how many later attempts superseded."""

    matched: int
    superseded_attempts: int

    @property
    def counted(self) -> int:
        return self.matched - self.superseded_attempts

    def public(self) -> dict[str, int]:
        return {
            "matched": self.matched,
            "superseded_attempts": self.superseded_attempts,
            "counted": self.counted,
        }


@dataclass(frozen=True)
class SelectionReport:
    selection: Selection
    counts: SelectionCounts
    summary: dict[str, Any]  # quality_summary.json
    lines: list[bytes]  # rollout_verdicts.jsonl, in Gym's order
    computed_on_read: int  # rollouts whose findings row was missing or stale

    def summary_bytes(self) -> bytes:
        return summary_bytes(self.summary)

    def verdict_lines(self) -> list[bytes]:
        return self.lines


def _superseded(selection: Selection, rollout_ids: list[str]) -> set[str]:
    return set() if selection.attempts == "all" else superseded_attempts(rollout_ids)


def _one_rollout(
    rollout_id: str, last_seq: int, digest: CompactDigest, ignore: tuple[str, ...]
) -> dict[str, Any]:
    """The route's answer from a compact digest (the subject's default task index is 0: the
    record checked alone)."""
    verdict, findings, unobserved = rollout_outcome(digest, ignore)
    task = 0 if digest.task_index is None else json.loads(digest.task_index)
    subject = {"_ng_task_index": task, "_ng_rollout_index": json.loads(digest.rollout_index)}
    return {
        "rollout_id": rollout_id,
        "last_seq": last_seq,
        "verdict": verdict,
        "findings": [
            {"check": finding["check"], "subject": subject, **finding} for finding in findings
        ],
        "unobserved": unobserved,
        "ignored_checks": sorted(ignore),
    }


class SyncRead(Protocol):
    """Runs a synchronous read whole in one snapshot (``LedgerStore.read_sync``: on SQLite on a
    reader thread, in one hop, off the event loop; on PostgreSQL through the async engine)."""

    def __call__(self, fn: Callable[[Connection], T], /) -> Awaitable[T]: ...


class HealthService:
    """Each answer is one synchronous read: a summary of 100,000 rollouts is about a second of
    Python, which on SQLite then runs on a reader thread instead of the server's event loop."""

    def __init__(self, read_sync: SyncRead) -> None:
        self._read_sync = read_sync

    async def rollout(self, rollout_id: str, ignored: Sequence[str] = ()) -> dict[str, Any]:
        """One rollout's verdict, findings and unobserved checks. The run-level parts
        (duplicate identity, task checks) need the run: see ``report``."""
        validate_rollout_id(rollout_id)
        ignore = ignored_checks(ignored)
        return await self._read_sync(partial(_rollout_health, rollout_id=rollout_id, ignore=ignore))

    async def report(self, selection: Selection, ignored: Sequence[str] = ()) -> SelectionReport:
        ignore = ignored_checks(ignored)
        return await self._read_sync(partial(_report, selection=selection, ignore=ignore))

    async def perf(self, selection: Selection) -> dict[str, Any]:
        rows = await self._read_sync(partial(queries.selected_perf_rows, selection=selection))
        excluded = _superseded(selection, [row["rollout_id"] for row in rows])
        kept = [row for row in rows if row["rollout_id"] not in excluded]
        documents = [
            {name: row[name] for name in queries.PERF_COLUMNS if row[name] is not None}
            for row in kept
            if row["num_turns"] is not None
        ]
        return {
            "selection": {
                **selection.describe(),
                **SelectionCounts(len(rows), len(excluded)).public(),
            },
            "perf_summary": perf_summary(documents, len(kept)),
        }


def _rollout_health(conn: Connection, rollout_id: str, ignore: tuple[str, ...]) -> dict[str, Any]:
    found = queries.read_one_with_findings(conn, rollout_id)
    digest = None if found is None else found[1]
    if found is not None and digest is None:
        text = findings_store.records_by_id(conn, [rollout_id]).get(rollout_id)
        digest = None if text is None else compact_digest(parse_json(text))
    if found is None or digest is None:
        raise NotFound(f"rollout {rollout_id!r} has no record to check")
    return _one_rollout(rollout_id, found[0], digest, ignore)


def _report(conn: Connection, selection: Selection, ignore: tuple[str, ...]) -> SelectionReport:
    """The selection's two files in one snapshot."""
    queries.snapshot(conn)
    excluded: set[str] = set()
    if selection.attempts == "latest":
        excluded = superseded_attempts(queries.selected_ids(conn, selection))
    # One statement and the lean pass over fresh rows; else every row through
    # compact.summarise (stale ones checked on read), in the same snapshot.
    fast = summarise_quickly(conn, selection, excluded, ignore)
    if fast is not None:
        return SelectionReport(
            selection=selection,
            counts=SelectionCounts(fast.records + len(excluded), len(excluded)),
            summary=fast.summary,
            lines=fast.lines,
            computed_on_read=0,
        )
    selected = queries.selected_rows(conn, selection)
    excluded = _superseded(selection, [row.rollout_id for row in selected])
    kept = [row for row in selected if row.rollout_id not in excluded]
    # The freshness rule: rows the follower has not (re)computed are checked here.
    stale = [row.rollout_id for row in kept if row.digest is None]
    texts = findings_store.records_by_id(conn, stale)
    computed = {rollout_id: compact_digest(parse_json(texts[rollout_id])) for rollout_id in stale}
    digests = [row.digest if row.digest is not None else computed[row.rollout_id] for row in kept]
    summary, lines = summarise(digests, ignore)
    return SelectionReport(
        selection=selection,
        counts=SelectionCounts(len(selected), len(excluded)),
        summary=summary,
        lines=lines,
        computed_on_read=len(stale),
    )
