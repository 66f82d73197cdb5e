"""The proxy's captures appended by a process of their own beside the server, at a lower CPU
priority (the default; ``LEDGER_PROXY_CAPTURE_PROCESS=false`` appends in the server).

Why: a capture costs the ledger several times the CPU of forwarding the call (docs/benchmarks.md,
the proxy), and in one process that work holds the GIL the
forwarding loop waits for, which was most of the proxy's added latency. In a process of its
own, niced, the kernel's scheduler puts the forwarding loop first whenever both want a core,
and the server keeps only the forwarding and a pickle of each answered call
(docs/decisions.md, "proxy-latency" 10).

The server starts the process with the proxy (capture_worker.py), hands it the recorder's
batches over a pipe and waits for each batch's outcomes, one batch at a time. The process also
runs the health follower when the views are kept in-server (``Settings.health_follower_home``;
by default the projector process runs it). If it dies, another is started (at once when a batch
was waiting, else after a second, retried with a growing pause, so the follower runs on between
calls); a batch it held is sent again to the new one, and then appended in the server: an append is
idempotent (a call already captured with the same exchange answers 200), so a batch the dead
process had committed is not stored twice. The mirror follows the log (in the projector
process, or in the server when the views are kept in-server), so it sees the process's events as
any other.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import Any

from ledger.app.config import Settings
from ledger.areas.proxy.capture_sink import AppendFailed, CaptureSink, Observed, Outcome
from ledger.areas.proxy.capture_worker import WorkerOptions
from ledger.areas.proxy.frames import HEADER_BYTES, decode_frame, encode_frame, frame_length
from ledger.areas.proxy.metrics import ProxyMetrics

log = logging.getLogger(__name__)

WORKER_MODULE = "ledger.areas.proxy.capture_worker"
START_TIMEOUT_S = 60.0
ATTEMPTS = 2
RESTART_DELAY_S = 1.0
MAX_RESTART_DELAY_S = 30.0


def capture_process_enabled(settings: Settings) -> bool:
    """Whether ``ledger serve`` runs a capture process: the proxy on and the setting on."""
    return settings.proxy_capture_process and bool(settings.upstreams)


class CaptureProcessGone(Exception):
    """The capture process ended (or never became ready) before answering."""


class CaptureProcess:
    """A ``CaptureSink`` in a child process. One caller at a time (the recorder's task)."""

    def __init__(
        self,
        options: WorkerOptions,
        fallback: CaptureSink,
        metrics: ProxyMetrics,
        command: Sequence[str] = (sys.executable, "-m", WORKER_MODULE),
        restart_delay_s: float = RESTART_DELAY_S,
    ) -> None:
        self._options = options
        self._fallback = fallback
        self._metrics = metrics
        self._command = tuple(command)
        self._restart_delay_s = restart_delay_s
        self._process: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Task[None] | None = None
        self._spawning = asyncio.Lock()  # the recorder's batch and a restart may both want one
        self._watchers: set[asyncio.Task[None]] = set()
        self._restarter: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        """Start the process in the background now, not at the first batch: its imports take
        about a second, which the server's own start need not wait for."""
        self._starting = asyncio.get_running_loop().create_task(self._start_once())

    async def _start_once(self) -> None:
        try:
            await self._running()
        except CaptureProcessGone as gone:
            log.error("the capture process did not start: %s", gone)
            self._restart_later()

    async def _started(self) -> None:
        """The first start's attempt done (a batch waits for it, not for later restarts)."""
        starting, self._starting = self._starting, None
        if starting is not None:
            await starting

    async def append(self, calls: Sequence[Observed]) -> list[Outcome]:
        await self._started()
        for attempt in range(1, ATTEMPTS + 1):
            try:
                reply = await self._exchange(await self._running(), list(calls))
            except CaptureProcessGone as gone:
                log.error(
                    "the capture process ended with a batch of %d captures (attempt %d of %d): %s",
                    len(calls),
                    attempt,
                    ATTEMPTS,
                    gone,
                )
                await self._discard()
                continue
            if reply[0] == "ok":
                return [Outcome(status, detail) for status, detail in reply[1]]
            raise AppendFailed(reply[1], reply[2])
        log.error("appending a batch of %d captures in the server instead", len(calls))
        self._restart_later()
        return await self._fallback.append(calls)

    async def close(self, wait_s: float) -> None:
        self._closing = True
        await self._started()
        for task in (*self._watchers, self._restarter):
            if task is not None:
                task.cancel()
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        assert process.stdin is not None
        process.stdin.close()  # its end of input: it finishes and exits
        try:
            await asyncio.wait_for(process.wait(), wait_s)
        except TimeoutError:
            log.error("the capture process did not exit in %.0f s: killed", wait_s)
            process.kill()
            await process.wait()

    async def _running(self) -> asyncio.subprocess.Process:
        async with self._spawning:
            process = self._process
            if process is not None and process.returncode is None:
                return process
            process = await self._spawn()
        watcher = asyncio.get_running_loop().create_task(self._restart_after_exit(process))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return process

    async def _restart_after_exit(self, process: asyncio.subprocess.Process) -> None:
        status = await process.wait()
        if self._closing or self._process is not process:
            return  # closed, or replaced by whoever saw it end first
        log.error("the capture process exited (status %s): starting another", status)
        self._restart_later()

    def _restart_later(self) -> None:
        """Start another in the background, retrying with a growing pause: between calls no
        batch would notice, and the health follower runs there."""
        if self._closing or (self._restarter is not None and not self._restarter.done()):
            return
        self._restarter = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        pause = self._restart_delay_s
        while not self._closing:
            await asyncio.sleep(pause)
            try:
                await self._running()
                return
            except CaptureProcessGone as gone:
                pause = min(pause * 2, max(MAX_RESTART_DELAY_S, self._restart_delay_s))
                log.error("the capture process did not start: %s (again in %.0f s)", gone, pause)

    async def _spawn(self) -> asyncio.subprocess.Process:
        if self._closing:
            raise CaptureProcessGone("closing")
        process = await asyncio.create_subprocess_exec(
            *self._command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        self._process = process
        self._metrics.capture_process_starts.inc()
        try:
            assert process.stdin is not None
            process.stdin.write(encode_frame(self._options))
            reply = await asyncio.wait_for(self._reply(process), START_TIMEOUT_S)
        except (CaptureProcessGone, TimeoutError, OSError) as exc:
            await self._discard()
            raise CaptureProcessGone(f"not ready: {exc!r}") from exc
        if reply != ("ready",):
            await self._discard()
            raise CaptureProcessGone(f"answered {reply!r} instead of ready")
        return process

    async def _exchange(self, process: asyncio.subprocess.Process, calls: list[Observed]) -> Any:
        assert process.stdin is not None
        try:
            process.stdin.write(encode_frame(calls))
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise CaptureProcessGone(repr(exc)) from exc
        return await self._reply(process)

    @staticmethod
    async def _reply(process: asyncio.subprocess.Process) -> Any:
        assert process.stdout is not None
        try:
            header = await process.stdout.readexactly(HEADER_BYTES)
            return decode_frame(await process.stdout.readexactly(frame_length(header)))
        except asyncio.IncompleteReadError as exc:
            raise CaptureProcessGone(f"exit status {await process.wait()}") from exc

    async def _discard(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()
