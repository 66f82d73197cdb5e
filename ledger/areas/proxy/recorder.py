"""Captures taken off the response path: appended after the client has its answer, in batches.

A capture never fails or delays a model response. Answered calls wait in a bounded queue; one
task hands whatever is waiting as one batch to the sink (capture_sink.py: the same validation
and write command as ``POST /v1/model-calls/batch``; by default in the capture process,
capture_process.py), so under load a writer transaction carries many captures, not one.

Only a capture that could not be stored whole marks its rollout incomplete (Gym's
``<id>.capture.incomplete``), logged and counted with its own reason: one that failed (refused,
the database down, the queue full), or an answer over the capture limit (stored without its
body). A call the upstream never answered (a timeout, an unreachable upstream, a broken status
line or headers) is captured whole: its category says what happened, and the forwarder has
logged and counted the upstream's failure. Shutdown appends what is still queued.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ledger.areas.captures.service import MAX_BATCH_ITEMS, CaptureService
from ledger.areas.proxy.capture_sink import AppendFailed, CaptureSink
from ledger.areas.proxy.metrics import ProxyMetrics
from ledger.gym.observed_calls import ObservedCall

log = logging.getLogger(__name__)

RESPONSE_TOO_LARGE = "response_too_large"
QUEUE_FULL = "queue_full"
# Captures waiting at most; past it a call is answered uncaptured (and its rollout marked).
MAX_QUEUED = 10_000
# The bodies one batch carries at most (a single call over it goes alone): bounds what a batch
# holds twice while it is handed on (the capture process's pipe takes a pickle of it).
MAX_BATCH_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class _Queued:
    rollout_id: str
    call: ObservedCall

    @property
    def size(self) -> int:
        return len(self.call.request_body) + len(self.call.response_body or b"")


class CaptureRecorder:
    def __init__(self, captures: CaptureService, metrics: ProxyMetrics, sink: CaptureSink) -> None:
        self._captures = captures  # for the incomplete markers
        self._sink = sink
        self._metrics = metrics
        self._queue: asyncio.Queue[_Queued] = asyncio.Queue(MAX_QUEUED)
        self._task: asyncio.Task[None] | None = None
        self._marking: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, rollout_id: str, call: ObservedCall) -> None:
        try:
            self._queue.put_nowait(_Queued(rollout_id, call))
        except asyncio.QueueFull:
            log.error("capture queue full: model call %s is not captured", call.model_call_id)
            self._failed(rollout_id, call.model_call_id, QUEUE_FULL, "the capture queue is full")
            return
        self._metrics.captures_pending.inc()

    async def _run(self) -> None:
        carried: _Queued | None = None  # taken from the queue, over the last batch's bytes
        while True:
            first = carried if carried is not None else await self._queue.get()
            carried = None
            batch, size = [first], first.size
            while len(batch) < MAX_BATCH_ITEMS and not self._queue.empty():
                queued = self._queue.get_nowait()
                if size + queued.size > MAX_BATCH_BYTES:
                    carried = queued
                    break
                batch.append(queued)
                size += queued.size
            try:
                await self._append(batch)
            finally:
                self._metrics.captures_pending.dec(len(batch))
                for _ in batch:
                    self._queue.task_done()

    async def _append(self, queued_calls: list[_Queued]) -> None:
        calls = [(queued.rollout_id, queued.call) for queued in queued_calls]
        try:
            outcomes = await self._sink.append(calls)
        except Exception as exc:
            failed = (
                exc if isinstance(exc, AppendFailed) else AppendFailed(type(exc).__name__, str(exc))
            )
            for queued in queued_calls:
                self._failed(
                    queued.rollout_id, queued.call.model_call_id, failed.reason, failed.detail
                )
            return
        for queued, outcome in zip(queued_calls, outcomes, strict=True):
            if outcome.status is None:
                self._failed(
                    queued.rollout_id, queued.call.model_call_id, "derivation", outcome.detail
                )
                continue
            if outcome.status >= 400:
                self._failed(
                    queued.rollout_id,
                    queued.call.model_call_id,
                    f"http_{outcome.status}",
                    outcome.detail,
                )
                continue
            self._metrics.captures.inc()
            if queued.call.response_over_limit:
                log.warning(
                    "model call %s (rollout %s): response over the capture limit, kept no body",
                    queued.call.model_call_id,
                    queued.rollout_id,
                )
                self._metrics.capture_failures.labels(reason=RESPONSE_TOO_LARGE).inc()
                self._mark_incomplete(queued.rollout_id, RESPONSE_TOO_LARGE)

    def _failed(self, rollout_id: str, model_call_id: str, reason: str, detail: str) -> None:
        # The id is Gym-charset (checked before forwarding): safe to log as is.
        log.error(
            "capture of model call %s (rollout %s) failed: %s: %s",
            model_call_id,
            rollout_id,
            reason,
            detail[:500],
        )
        self._metrics.capture_failures.labels(reason=reason).inc()
        self._mark_incomplete(rollout_id, f"capture failed: {reason}")

    def _mark_incomplete(self, rollout_id: str, reason: str) -> None:
        task = asyncio.get_running_loop().create_task(self._mark(rollout_id, reason))
        self._marking.add(task)
        task.add_done_callback(self._marking.discard)

    async def _mark(self, rollout_id: str, reason: str) -> None:
        try:
            await self._captures.mark_incomplete(rollout_id, reason=reason[:500])
        except Exception as exc:
            log.error(
                "rollout %s could not be marked incomplete: %s: %s",
                rollout_id,
                type(exc).__name__,
                str(exc)[:500],
            )
            self._metrics.incomplete_mark_failures.inc()

    async def drain(self, wait_s: float) -> None:
        """Append what is queued (up to ``wait_s`` seconds), then stop, the sink last."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        try:
            async with asyncio.timeout_at(deadline):
                await self._queue.join()
                while self._marking:
                    await asyncio.wait(set(self._marking))
        except TimeoutError:
            log.error("%d captures were still queued at shutdown", self._queue.qsize())
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._sink.close(max(1.0, deadline - loop.time()))
