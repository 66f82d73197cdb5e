"""A child process the server keeps running beside itself: started with the server, started
again when it exits, stopped by closing its standard input.

The projector (app/projector.py) and the OTLP export (areas/otel/export_process.py) are such
children; each says how to talk to its child once started (``_talk``: the handshake and what it
reads from the child's output until it ends), and calls ``_serving()`` once the child is ready.
A child that exits after it was serving is started again after ``restart_delay_s``; one that
keeps exiting before that waits twice as long each time, up to ``max_restart_delay_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0
MAX_RESTART_DELAY_S = 30.0
STOP_TIMEOUT_S = 20.0


class ChildProcess:
    def __init__(
        self,
        label: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        restart_delay_s: float,
        max_restart_delay_s: float = MAX_RESTART_DELAY_S,
    ) -> None:
        self._label = label
        self._command = tuple(command)
        self._env = None if env is None else dict(env)
        self._restart_delay_s = restart_delay_s
        self._max_restart_delay_s = max_restart_delay_s
        self._task: asyncio.Task[None] | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._closing = False
        self._ready = False
        self.starts = 0

    @property
    def pid(self) -> int | None:
        """The running process's id (None between two)."""
        process = self._process
        return None if process is None or process.returncode is not None else process.pid

    async def start(self) -> None:
        if self._task is None:
            self._closing = False
            self._task = asyncio.create_task(self._run(), name=f"ledger-{self._label}")

    async def stop(self) -> None:
        """Close its stdin (it finishes its step and exits), wait for it, kill it after
        STOP_TIMEOUT_S; then let ``_talk`` read what the child wrote last."""
        self._closing = True
        process = self._process
        if process is not None and process.returncode is None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                log.error("%s did not exit in %.0f s: killed", self._label, STOP_TIMEOUT_S)
                process.kill()
                await process.wait()
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT_S)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _serving(self) -> None:
        """The child is ready: when it exits, that is not a failure to start."""
        self._ready = True

    def _was_serving(self, ran_s: float) -> bool:
        """Whether the child that exited after ``ran_s`` seconds had been serving (its pause
        starts over) rather than failing to start."""
        return self._ready

    async def _talk(self, process: asyncio.subprocess.Process) -> None:
        raise NotImplementedError

    async def _run(self) -> None:
        pause = self._restart_delay_s
        while not self._closing:
            self._ready = False
            started = time.monotonic()
            try:
                await self._once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed", self._label)
            if self._closing:
                return
            serving = self._was_serving(time.monotonic() - started)
            if serving:
                pause = self._restart_delay_s  # it was serving: not a crash loop
            log.error("%s exited: another in %.1f s", self._label, pause)
            await asyncio.sleep(pause)
            if not serving:
                pause = min(self._max_restart_delay_s, pause * 2)

    async def _once(self) -> None:
        process = await asyncio.create_subprocess_exec(
            *self._command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self._env,
        )
        self._process = process
        self.starts += 1
        try:
            await self._talk(process)
            await process.wait()
        finally:
            if process.returncode is None and not self._closing:
                process.kill()
                await process.wait()
