"""The OTLP export in a process of its own beside the server, at a lower CPU priority (the
default; ``LEDGER_OTLP_PROCESS=false`` runs the follower in the server).

Why: the export reads and maps a rollout's whole record at each change, CPU that in the
server's process would hold the GIL its requests wait for; `scripts/bench otlp` measured what
that cut from capture ingest. Niced in a process of its own, the kernel's scheduler puts the
server first whenever both want a core (the capture proxy's capture process does the same,
docs/decisions.md "proxy-latency" 10).

The server starts the process (export_worker.py) with the ledger, sends it its options and
reads its tally into /metrics; the lag gauges are read from the checkpoint as ever. If it
exits, another is started after a pause that grows to 30 s; the new one resumes from the
checkpoint, so what the first had not saved is sent again, never lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Sequence

from ledger.app.metrics import LedgerMetrics
from ledger.areas.otel.export_worker import ExportOptions

log = logging.getLogger(__name__)

WORKER_MODULE = "ledger.areas.otel.export_worker"
START_TIMEOUT_S = 60.0
RESTART_DELAY_S = 1.0
MAX_RESTART_DELAY_S = 30.0
STOP_TIMEOUT_S = 20.0
TALLY_KEYS = ("sent", "refused", "retried", "failed_requests", "export_failures")


class OtlpExportProcess:
    def __init__(
        self,
        options: ExportOptions,
        metrics: LedgerMetrics,
        command: Sequence[str] = (sys.executable, "-m", WORKER_MODULE),
    ) -> None:
        self._options = options
        self._metrics = metrics
        self._command = tuple(command)
        self._task: asyncio.Task[None] | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._closing = False
        self.starts = 0

    async def start(self) -> None:
        if self._task is None:
            self._closing = False
            self._task = asyncio.create_task(self._run(), name="ledger-otlp-export-process")

    async def stop(self) -> None:
        """Close its stdin (it finishes its step and saves its checkpoint), wait for it, kill
        it after STOP_TIMEOUT_S."""
        self._closing = True
        process = self._process
        if process is not None and process.returncode is None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                log.error("the OTLP export process did not exit in %.0f s: killed", STOP_TIMEOUT_S)
                process.kill()
                await process.wait()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        pause = RESTART_DELAY_S
        while not self._closing:
            try:
                await self._once()
                pause = RESTART_DELAY_S  # it ran: the next start is soon
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the OTLP export process failed")
            if self._closing:
                return
            log.error("the OTLP export process exited: another in %.0f s", pause)
            await asyncio.sleep(pause)
            pause = min(MAX_RESTART_DELAY_S, pause * 2)

    async def _once(self) -> None:
        process = await asyncio.create_subprocess_exec(
            *self._command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        self._process = process
        self.starts += 1
        try:
            await self._follow(process)
        finally:
            if process.returncode is None and not self._closing:
                process.kill()
            if not self._closing:
                await process.wait()

    async def _follow(self, process: asyncio.subprocess.Process) -> None:
        """Hand it its options, wait for it to be ready, then read its tallies until it ends."""
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(self._options) + "\n").encode())
        await process.stdin.drain()
        ready = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
        if not ready or json.loads(ready) != {"ready": True}:
            raise RuntimeError(f"the OTLP export process answered {ready!r}")
        seen = dict.fromkeys(TALLY_KEYS, 0)
        while line := await process.stdout.readline():
            tally = json.loads(line)
            moved = {key: int(tally[key]) - seen[key] for key in TALLY_KEYS}
            seen = {key: int(tally[key]) for key in TALLY_KEYS}
            self._metrics.count_otlp(
                sent=moved["sent"],
                refused=moved["refused"],
                retried=moved["retried"],
                failed_requests=moved["failed_requests"],
            )
            self._metrics.otlp_export_failures.inc(moved["export_failures"])
