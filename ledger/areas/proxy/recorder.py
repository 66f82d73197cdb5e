"""Captures taken off the response path: appended after the client has its answer.

A capture never fails or delays a model response. Each one is appended by its own task through
the captures service (the same validation and command as ``POST /v1/rollouts/{id}/model-calls``);
a failure is logged, counted, and the rollout is marked incomplete (Gym's
``<id>.capture.incomplete``). Shutdown waits for the tasks still running.
"""

from __future__ import annotations

import asyncio
import logging

from ledger.areas.captures.service import CaptureService
from ledger.areas.proxy.metrics import ProxyMetrics
from ledger.gym.observed_calls import ObservedCall, exchange_of

log = logging.getLogger(__name__)

RESPONSE_TOO_LARGE = "response_too_large"


class CaptureRecorder:
    def __init__(self, captures: CaptureService, metrics: ProxyMetrics) -> None:
        self._captures = captures
        self._metrics = metrics
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, rollout_id: str, call: ObservedCall) -> None:
        task = asyncio.get_running_loop().create_task(self._record(rollout_id, call))
        self._tasks.add(task)
        self._metrics.captures_pending.inc()
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._metrics.captures_pending.dec()

    async def _record(self, rollout_id: str, call: ObservedCall) -> None:
        try:
            await self._captures.append(rollout_id, exchange_of(call))
        except Exception as exc:
            # The id is Gym-charset (checked before forwarding): safe to log as is.
            log.error(
                "capture of model call %s (rollout %s) failed: %s: %s",
                call.model_call_id,
                rollout_id,
                type(exc).__name__,
                str(exc)[:500],
            )
            self._metrics.capture_failures.labels(reason=type(exc).__name__).inc()
            await self._mark_incomplete(rollout_id, f"capture failed: {type(exc).__name__}")
            return
        self._metrics.captures.inc()
        if call.response_body is None:
            # Captured without its response body (over proxy_max_response_bytes).
            log.warning(
                "model call %s (rollout %s): response over the capture limit, kept no body",
                call.model_call_id,
                rollout_id,
            )
            self._metrics.capture_failures.labels(reason=RESPONSE_TOO_LARGE).inc()
            await self._mark_incomplete(rollout_id, RESPONSE_TOO_LARGE)

    async def _mark_incomplete(self, rollout_id: str, reason: str) -> None:
        try:
            await self._captures.mark_incomplete(rollout_id, reason=reason)
        except Exception as exc:
            log.error(
                "rollout %s could not be marked incomplete: %s: %s",
                rollout_id,
                type(exc).__name__,
                str(exc)[:500],
            )
            self._metrics.incomplete_mark_failures.inc()

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self, wait_s: float) -> None:
        """Wait up to ``wait_s`` seconds for the captures still being appended."""
        if not self._tasks:
            return
        _, still_running = await asyncio.wait(set(self._tasks), timeout=wait_s)
        if still_running:
            log.error("%d captures were still being appended at shutdown", len(still_running))
