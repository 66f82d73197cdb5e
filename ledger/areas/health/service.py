"""Run-level answers over the stored records: one rollout's health, the quality summary and
the verdict lines of a selection, its perf summary. Computed on read from the records the
ledger serves (so an answer is never older than the records it reads), in one snapshot."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.health import queries
from ledger.areas.health.selection import Selection, superseded_attempts
from ledger.gym.health.catalogue import UnknownCheck, normalize_ignored_checks
from ledger.gym.health.evaluate import RolloutDigest, evaluate
from ledger.gym.health.facts import record_facts
from ledger.gym.health.run import HealthReport
from ledger.gym.health.summary import (
    mark_duplicates,
    quality_summary,
    summary_bytes,
    verdict_lines,
)
from ledger.gym.ids import validate_rollout_id
from ledger.gym.perf_summary import perf_summary
from ledger.log.errors import BadRequest, NotFound

ReadConnection = Callable[[], AbstractAsyncContextManager[AsyncConnection]]


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
    report: HealthReport

    def summary_bytes(self) -> bytes:
        return summary_bytes(self.report.summary)

    def verdict_lines(self) -> list[bytes]:
        return list(verdict_lines(self.report.digests))


def _superseded(selection: Selection, rollout_ids: list[str]) -> set[str]:
    return set() if selection.attempts == "all" else superseded_attempts(rollout_ids)


class HealthService:
    def __init__(self, read: ReadConnection) -> None:
        self._read = read

    async def rollout(self, rollout_id: str, ignored: Sequence[str] = ()) -> dict[str, Any]:
        """One rollout's verdict, findings and unobserved checks. The run-level parts
        (duplicate identity, task checks) need the run: see ``report``."""
        validate_rollout_id(rollout_id)
        ignore = ignored_checks(ignored)
        async with self._read() as conn:
            stored = await queries.read_one(conn, rollout_id)
        if stored is None:
            raise NotFound(f"rollout {rollout_id!r} has no record to check")
        digest = evaluate(
            record_facts(json.loads(stored.text), 0, canonical_trajectory=True), ignore
        )
        return {
            "rollout_id": rollout_id,
            "last_seq": stored.last_seq,
            "verdict": digest.verdict,
            "findings": [finding.public() for finding in digest.findings],
            "unobserved": list(digest.unobserved),
            "ignored_checks": sorted(ignore),
        }

    async def report(self, selection: Selection, ignored: Sequence[str] = ()) -> SelectionReport:
        ignore = ignored_checks(ignored)
        # Two passes in one snapshot: the ids (to know which attempts are superseded), then
        # the records, each checked as it arrives (only its digest is kept).
        async with self._read() as conn:
            await queries.snapshot(conn)
            ids = await queries.selected_ids(conn, selection)
            excluded = _superseded(selection, ids)
            facts: list[RolloutDigest] = []
            async for stored in queries.selected_records(conn, selection):
                if stored.rollout_id not in excluded:
                    facts.append(
                        evaluate(
                            record_facts(
                                json.loads(stored.text), len(facts), canonical_trajectory=True
                            ),
                            ignore,
                        )
                    )
        digests = mark_duplicates(facts, ignore)
        return SelectionReport(
            selection=selection,
            counts=SelectionCounts(len(ids), len(excluded)),
            report=HealthReport(digests, quality_summary(digests, ignore), ignore),
        )

    async def perf(self, selection: Selection) -> dict[str, Any]:
        async with self._read() as conn:
            rows = await queries.selected_perf_rows(conn, selection)
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
