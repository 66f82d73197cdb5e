"""The continuous export: ``ledger serve --otlp-endpoint URL`` sends every rollout whose record
changed to the collector, as one more follower of the log.

It tails ``observation_records`` by ``last_seq`` (every change to a record raises it, as the
health follower does) and keeps its own checkpoint, the row ``otlp-export`` of
``mirror_checkpoints``: every record whose last change is at or before it has been taken by the
collector. Delivery is at least once: the checkpoint moves only after a page's spans were all
taken, so a page cut short by a failure, a restart or a SIGKILL is sent again whole, and its
spans keep their ids (ids.py), which a backend keeps one of. The log is the queue: the follower
holds one page of rollouts in memory, however far behind the collector is.

A record that changed less than ``settle_seconds`` ago waits (the page ends before it): a
rollout being written is sent once it pauses, not at every capture, and a backend that keeps
the first copy of a span (Phoenix) is not left with a rollout span of half its length.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import partial

from ledger.app.metrics import LedgerMetrics
from ledger.areas.otel.export import mapped_spans, send_in_batches
from ledger.areas.otel.mapping import MappingOptions
from ledger.areas.otel.sender import ExportFailed, OtlpSender, SendTally
from ledger.areas.otel.sent_spans import SentSpans
from ledger.areas.otel.source import OTLP_CHECKPOINT, ChangedRollout, changed_after
from ledger.areas.otel.spans import Span
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.mirror.checkpoint import load_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

CheckpointSink = Callable[[int], Awaitable[None]]


async def save_checkpoint(store: LedgerStore, seq: int) -> None:
    """The export's checkpoint, one write command."""

    def command(tx: WriteTransaction) -> None:
        write_checkpoint(tx.conn, seq, name=OTLP_CHECKPOINT)

    await store.execute(command)


class OtlpFollower:
    def __init__(
        self,
        store: LedgerStore,
        sender: OtlpSender,
        *,
        options: MappingOptions | None = None,
        metrics: LedgerMetrics | None = None,
        page_rollouts: int = 200,
        batch_spans: int = 512,
        settle_seconds: float = 1.0,
        poll_seconds: float = 0.5,
        checkpoint_seconds: float = 1.0,
        max_pause_seconds: float = 10.0,
        stop_seconds: float = 10.0,
        checkpoint_sink: CheckpointSink | None = None,
    ) -> None:
        self._store = store
        self._sender = sender
        # Where a checkpoint goes: a write command of the store (default), or, in the export
        # process, a line to the server, which writes it (export_worker.py).
        self._checkpoint_sink = checkpoint_sink or partial(save_checkpoint, store)
        self._options = options or MappingOptions()
        self._metrics = metrics
        self._page_rollouts = page_rollouts
        self._batch_spans = batch_spans
        self._settle_seconds = settle_seconds
        self._poll_seconds = poll_seconds
        self._checkpoint_seconds = checkpoint_seconds
        self._max_pause_seconds = max_pause_seconds
        self._stop_seconds = stop_seconds
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._high_water: int | None = None
        self._saved: int | None = None
        self._saved_at = 0.0
        self._reported = SendTally()
        self._sent = SentSpans()
        # The counters in /metrics move as each request ends, not when a page does.
        sender.on_request = self._report
        self.exported = 0  # rollouts sent since start (tests, benchmarks)
        self.export_failures = 0  # pages the collector did not take (sent again later)

    async def start(self) -> None:
        if self._task is None:
            self._stopping = asyncio.Event()
            await self._sender.__aenter__()
            self._task = asyncio.create_task(self._run(), name="ledger-otlp-export")

    async def stop(self) -> None:
        """Let the current step finish; cancel it only after ``stop_seconds`` (a collector that
        does not answer), then save how far it got."""
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
        with contextlib.suppress(Exception):
            await self._save_checkpoint()
        await self._sender.__aexit__(None, None, None)

    async def step(self) -> int:
        """One page: the rollouts sent, 0 when none had changed (or none has settled)."""
        if self._high_water is None:
            await self._resume()
        assert self._high_water is not None
        read = partial(
            changed_after,
            after_seq=self._high_water,
            limit=self._page_rollouts,
            settled_at=datetime.now(UTC) - timedelta(seconds=self._settle_seconds),
        )
        ready = await self._store.read_sync(read)
        if not ready:
            return 0
        fresh = await asyncio.to_thread(self._unsent, ready)
        await send_in_batches(self._sender, [span for span, _ in fresh], self._batch_spans)
        self._sent.remember(fresh)
        self._high_water = ready[-1].last_seq
        self.exported += len(ready)
        return len(ready)

    def _unsent(self, ready: list[ChangedRollout]) -> list[tuple[Span, bytes]]:
        return self._sent.unsent(mapped_spans(ready, self._options))

    async def catch_up(self) -> int:
        """Send every settled change; the rollouts sent (tests, benchmarks)."""
        sent = 0
        while count := await self.step():
            sent += count
        await self._save_checkpoint()
        return sent

    async def _resume(self) -> None:
        async with self._store.read() as conn:
            saved = await load_checkpoint(conn, name=OTLP_CHECKPOINT)
        # A checkpoint of another epoch (a restored copy) may name other events: send all.
        self._high_water = saved.seq if saved.trusted else 0
        self._saved = self._high_water

    async def _save_checkpoint(self) -> None:
        seq = self._high_water
        if seq is None or seq == self._saved:
            return

        await self._checkpoint_sink(seq)
        self._saved = seq
        self._saved_at = time.monotonic()

    def _report(self) -> None:
        if self._metrics is None:
            return
        tally, seen = self._sender.tally, self._reported
        self._metrics.count_otlp(
            sent=tally.sent - seen.sent,
            refused=tally.refused - seen.refused,
            retried=tally.retried - seen.retried,
            failed_requests=tally.failed_requests - seen.failed_requests,
        )
        self._reported = SendTally(tally.sent, tally.refused, tally.retried, tally.failed_requests)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                sent = await self.step()
                failures = 0
                if time.monotonic() - self._saved_at >= self._checkpoint_seconds or not sent:
                    await self._save_checkpoint()
                if sent < self._page_rollouts:
                    await self._pause(self._poll_seconds)
            except asyncio.CancelledError:
                raise
            except ExportFailed as exc:
                # The collector is away or refuses: the page is sent again, from the checkpoint
                # kept in memory, after a pause that doubles up to max_pause_seconds.
                failures += 1
                self.export_failures += 1
                if self._metrics is not None:
                    self._metrics.count_otlp_failure()
                log.warning("OTLP export: %s; trying again", exc.message)
                await self._pause(min(self._max_pause_seconds, 2.0 ** min(failures, 10)))
            except Exception:
                log.exception("OTLP export failed; resuming from its checkpoint")
                self._high_water = None
                await self._pause(self._poll_seconds)
