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
import json
import logging
import sys
from collections.abc import Sequence

from ledger.app.metrics import LedgerMetrics
from ledger.areas.otel.export_worker import ExportOptions
from ledger.areas.otel.follower import save_checkpoint
from ledger.child_process import MAX_RESTART_DELAY_S, START_TIMEOUT_S, ChildProcess
from ledger.log.store import LedgerStore

log = logging.getLogger(__name__)

WORKER_MODULE = "ledger.areas.otel.export_worker"
RESTART_DELAY_S = 1.0
TALLY_KEYS = ("sent", "refused", "retried", "failed_requests", "export_failures")


class OtlpExportProcess(ChildProcess):
    def __init__(
        self,
        options: ExportOptions,
        store: LedgerStore,
        metrics: LedgerMetrics,
        command: Sequence[str] = (sys.executable, "-m", WORKER_MODULE),
    ) -> None:
        super().__init__("the OTLP export process", command, restart_delay_s=RESTART_DELAY_S)
        self._options = options
        self._store = store
        self._metrics = metrics

    def _was_serving(self, ran_s: float) -> bool:
        # It may be ready and still fail at its first export: what counts is running a while.
        return ran_s > MAX_RESTART_DELAY_S

    async def _talk(self, process: asyncio.subprocess.Process) -> None:
        """Hand it its options, wait for it to be ready, then read its tallies until it ends."""
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(self._options) + "\n").encode())
        await process.stdin.drain()
        ready = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
        if not ready or json.loads(ready) != {"ready": True}:
            raise RuntimeError(f"the OTLP export process answered {ready!r}")
        self._serving()
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
