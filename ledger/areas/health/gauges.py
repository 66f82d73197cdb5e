"""The verdict gauges of ``/metrics`` for a server whose health follower runs in another
process (the proxy's capture process, ledger/areas/proxy/capture_process.py): read from
``health_findings`` every few seconds, as the follower itself reports them while it is busy."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ledger.app.metrics import LedgerMetrics
from ledger.areas.health import findings_store
from ledger.log.store import LedgerStore

log = logging.getLogger(__name__)


class VerdictGauges:
    def __init__(self, store: LedgerStore, metrics: LedgerMetrics, every_s: float = 5.0) -> None:
        self._store = store
        self._metrics = metrics
        self._every_s = every_s
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ledger-verdict-gauges")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def report(self) -> None:
        async with self._store.read() as conn:
            counts = await findings_store.verdict_counts(conn)
        self._metrics.set_health_verdicts(counts.by_verdict, counts.behind)

    async def _run(self) -> None:
        while True:
            try:
                await self.report()
            except Exception:  # the database failed us: the gauges keep their last values
                log.exception("reading the verdict counts failed")
            await asyncio.sleep(self._every_s)
