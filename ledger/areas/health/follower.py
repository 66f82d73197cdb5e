"""The health follower: keeps ``health_findings`` current right after the append, off the
writer's critical section.

It tails ``observation_records`` by ``last_seq`` (every change to a record raises it), checks
each changed record on a worker thread, and writes a page of rows as one writer command. A
record that changes several times between two polls is checked once, and a record being
written is checked once it has been quiet for a second (``SettledHead``); unless a page was
full, the follower pauses between steps even while records keep changing: a poll, or four times
as long as the step took when that is longer (its CPU share stays bounded as rollouts grow).
The appends never wait for it: a reader that finds a row missing or older than the record
checks the record itself (service.py), so the follower only decides how fast answers are, never
what they say.

On start it resumes from the highest ``last_seq`` stored (pages are written in ``last_seq``
order, one transaction each) and drops the rows of deleted rollouts.

While an upgrade builds the views beside the live ones (log/view_builds.py) the serving loop
waits: the swap empties the findings, computed from the live build's records, and the follower
then checks every record of the new build, so what it would check meanwhile is thrown away, and
the build took a share of the projector process it now keeps. Reads stay right meanwhile (a
record whose row is missing or older is checked by its reader); the verdict gauges stay as they
were when the build started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque

from sqlalchemy import Connection

from ledger.app.metrics import LedgerMetrics
from ledger.areas.health import findings_store
from ledger.areas.health.queries import snapshot
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.log.view_builds import read_builds

log = logging.getLogger(__name__)

# Seconds of pause per second of work while records keep changing: the follower takes at most
# a fifth of the time (docs/decisions.md, "follow-the-log" 10).
IDLE_PER_WORK = 4.0
# How long a record must be unchanged before the serving loop checks it (SettledHead).
SETTLE_S = 1.0
# While the views are being built beside the live ones, how often the serving loop looks
# whether the build has been swapped in.
BUILD_POLL_S = 1.0


class SettledHead:
    """The newest change of any record (``last_seq``) as it was ``settle_seconds`` ago, from
    those the follower read.

    The serving loop checks only records whose latest change is at most that seq: a rollout
    that is being written (a change within the last ``settle_seconds``) is checked once it goes
    quiet, not at every poll while it grows; ``catch_up`` checks everything. Records are taken
    in ``last_seq`` order up to the bound, so the high-water mark never passes a record left
    for later."""

    def __init__(self, settle_seconds: float) -> None:
        self._settle_seconds = settle_seconds
        self._seen: deque[tuple[float, int]] = deque()

    def observe(self, now: float, head: int) -> None:
        self._seen.append((now, head))

    def settled(self, now: float) -> int:
        """The newest head read at least ``settle_seconds`` before ``now``; 0 before any."""
        cutoff = now - self._settle_seconds
        seen = self._seen
        # Drop the heads that a newer one, itself old enough, supersedes.
        while len(seen) > 1 and seen[1][0] <= cutoff:
            seen.popleft()
        if seen and seen[0][0] <= cutoff:
            return seen[0][1]
        return 0


def pause_after(checked: int, worked_s: float, *, page_size: int, poll_seconds: float) -> float:
    """How long the follower waits after a step that checked ``checked`` records in
    ``worked_s`` seconds. A full page means it is behind: it goes on at once. Otherwise it
    waits for the next poll even when the step found changes, and at least IDLE_PER_WORK times
    as long as the step took: a record is read whole (every call's pieces) and checked whole,
    so a step over rollouts that keep growing costs more each time; the pause keeps the
    follower's share of the CPU (shared with the views and the mirror in the projector)
    bounded, and a rollout is checked once a pause, not once a capture."""
    if checked >= page_size:
        return 0.0
    return max(poll_seconds, worked_s * IDLE_PER_WORK)


class HealthFollower:
    def __init__(
        self,
        store: LedgerStore,
        *,
        metrics: LedgerMetrics | None = None,
        page_size: int = 500,
        poll_seconds: float = 0.2,
        retry_seconds: float = 1.0,
        report_seconds: float = 5.0,
        stop_seconds: float = 10.0,
        settle_seconds: float = SETTLE_S,
        build_poll_seconds: float = BUILD_POLL_S,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._page_size = page_size
        self._poll_seconds = poll_seconds
        self._retry_seconds = retry_seconds
        self._report_seconds = report_seconds
        self._stop_seconds = stop_seconds
        self._build_poll_seconds = build_poll_seconds
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._high_water: int | None = None
        self._reported_at = 0.0
        self._unreported = True
        self.checked = 0  # records checked since start (tests, benchmarks)
        self.waits_for_builds = 0  # turns the serving loop waited for a build (tests)
        self._heads = SettledHead(settle_seconds)

    async def start(self) -> None:
        if self._task is None:
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="ledger-health-follower")

    async def stop(self) -> None:
        """Let the current step finish (a read cancelled mid-query would leave the driver's
        thread working for a closed loop); cancel only after ``stop_seconds``."""
        if self._task is None:
            return
        self._stopping.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self._stop_seconds)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._task = None

    async def catch_up(self) -> int:
        """Check every record changed since the last step; the number checked."""
        before = self.checked
        while await self.step():
            pass
        await self.report()
        return self.checked - before

    async def step(self, upto_seq: int | None = None) -> int:
        """One page: the records checked, 0 when nothing had changed. ``upto_seq``: only
        records whose latest change is at most that seq (the serving loop's settled head)."""
        if self._high_water is None:
            await self._resume()
        assert self._high_water is not None
        remembered, limit = self._high_water, self._page_size

        def changed(conn: Connection) -> tuple[int, int, list[findings_store.StoredRecordRow]]:
            snapshot(conn)  # each record's seq and text from one snapshot
            # Rows removed under the mark (another process reset the views to rebuild them,
            # which empties the findings with them; a tombstone took the newest rows): the
            # records from there are checked again, or a rebuilt record that kept its
            # last_seq would never be.
            after_seq = min(remembered, findings_store.stored_high_water(conn))
            # The records' own newest change, not the log's head: the views may be far
            # behind the log, and a record changes when the views apply its events.
            head = findings_store.newest_record_change(conn)
            return (
                after_seq,
                head,
                findings_store.changed_records(
                    conn, after_seq=after_seq, limit=limit, upto_seq=upto_seq
                ),
            )

        after_seq, head, records = await self._store.read_sync(changed)
        if after_seq < remembered:
            log.info("health findings removed past seq %d: checking records again", after_seq)
            self._high_water = after_seq
        self._heads.observe(time.monotonic(), head)
        if not records:
            return 0
        rows = await asyncio.to_thread(findings_store.computed_rows, records)

        def command(tx: WriteTransaction) -> int:
            return findings_store.write_rows(tx.conn, rows)

        await self._store.execute(command)
        self._high_water = records[-1].last_seq
        self.checked += len(records)
        self._unreported = True
        return len(records)

    async def report(self) -> None:
        """The verdict gauges, from the table (a GROUP BY, at most every ``report_seconds``
        while the follower is busy)."""
        if self._metrics is None or not self._unreported:
            return
        async with self._store.read() as conn:
            counts = await findings_store.verdict_counts(conn)
        self._metrics.set_health_verdicts(counts.by_verdict, counts.behind)
        self._reported_at = time.monotonic()
        self._unreported = False

    async def _resume(self) -> None:
        def command(tx: WriteTransaction) -> int:
            return findings_store.delete_orphans(tx.conn)

        async with self._store.read() as conn:
            orphans = await findings_store.count_orphans(conn)
        if orphans:  # a writer command only when there is something to remove
            await self._store.execute(command)
        async with self._store.read() as conn:
            self._high_water = await findings_store.high_water(conn)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _building(self) -> bool:
        return await self._store.read_sync(lambda conn: read_builds(conn).building is not None)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if await self._building():
                    self.waits_for_builds += 1
                    await self._pause(self._build_poll_seconds)
                    continue
                started = time.monotonic()
                checked = await self.step(upto_seq=self._heads.settled(started))
                worked = time.monotonic() - started
                if not checked or time.monotonic() - self._reported_at >= self._report_seconds:
                    await self.report()
                pause = pause_after(
                    checked, worked, page_size=self._page_size, poll_seconds=self._poll_seconds
                )
                if pause:
                    await self._pause(pause)
            except asyncio.CancelledError:
                raise
            except Exception:
                # The database failed us: resume from what is stored (rows are exact either way).
                log.exception("health follower failed; resuming from the stored rows")
                self._high_water = None
                await self._pause(self._retry_seconds)
