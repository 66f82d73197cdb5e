"""The OTLP export in a process of its own beside the server, at a lower CPU priority (the
default; ``LEDGER_OTLP_PROCESS=false`` runs the follower in the server).

Why: the export reads and maps a rollout's whole record at each change, CPU that in the
server's process would hold the GIL its requests wait for; `scripts/bench otlp` measured what
that cut from capture ingest. Niced in a process of its own, the kernel's scheduler puts the
server first whenever both want a core (the capture proxy's capture process does the same,
docs/decisions.md "proxy-latency" 10).

The server starts the process (export_worker.py) with the ledger, sends it its options, reads
its tally into /metrics and writes the checkpoints it sends (the process only reads the
database); the lag gauges are read from the checkpoint as ever. If it
exits, another is started after a pause that grows to 30 s; the new one resumes from the
checkpoint, so what the first had not saved is sent again, never lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Sequence

from ledger.app.metrics import LedgerMetrics
from ledger.areas.otel.export_worker import ExportOptions
from ledger.areas.otel.follower import save_checkpoint
from ledger.log.store import LedgerStore

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
        store: LedgerStore,
        metrics: LedgerMetrics,
        command: Sequence[str] = (sys.executable, "-m", WORKER_MODULE),
    ) -> None:
        self._options = options
        self._store = store
        self._metrics = metrics
        self._command = tuple(command)
        self._task: asyncio.Task[None] | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._closing = False
        self.starts = 0

    @property
    def pid(self) -> int | None:
        """The running process's id (None between two)."""
        process = self._process
        return None if process is None or process.returncode is not None else process.pid

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
            # It reads the process's last lines (its final checkpoint) before it ends.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT_S)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        pause = RESTART_DELAY_S
        while not self._closing:
            started = time.monotonic()
            try:
                await self._once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the OTLP export process failed")
            if self._closing:
                return
            if time.monotonic() - started > MAX_RESTART_DELAY_S:
                pause = RESTART_DELAY_S  # it ran a while: this is not a crash loop
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
            if "checkpoint" in tally:
                await save_checkpoint(self._store, int(tally["checkpoint"]))
                continue
            moved = {key: int(tally[key]) - seen[key] for key in TALLY_KEYS}
            seen = {key: int(tally[key]) for key in TALLY_KEYS}
            self._metrics.count_otlp(
                sent=moved["sent"],
                refused=moved["refused"],
                retried=moved["retried"],
                failed_requests=moved["failed_requests"],
            )
            self._metrics.otlp_export_failures.inc(moved["export_failures"])
