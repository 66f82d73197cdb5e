"""The projector: the process that keeps the views current beside ``ledger serve``, and the
other followers of the log: the JSONL mirror and the health checks (health_findings).

``ledger serve`` starts it (``ledger project``, this module's ``run_projector``) and starts
another if it exits, after a pause that grows to 30 s; a new one resumes from the views'
checkpoint (log/projection_follower.py). It holds a writer of its own: on SQLite its steps take
turns with the server's appends on the file's write lock, on PostgreSQL on the append lock. Its
standard input is the server's pipe: when the server closes it, or dies, the projector finishes
its step and exits. ``LEDGER_PROJECTOR=in-server`` runs the follower as a task of the server
instead (the in-process test apps do); the mirror and the health follower then run in the server
too (bootstrap.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Protocol

from ledger.app.areas import default_catalogue, default_mirror_areas, view_projectors
from ledger.app.config import Settings
from ledger.areas.health.follower import HealthFollower
from ledger.log.projection_follower import ProjectionFollower
from ledger.log.store import LedgerStore
from ledger.mirror.election import Election, projector_election_for
from ledger.mirror.follower import MirrorFollower, build_follower

log = logging.getLogger(__name__)

READY_LINE = b"projector ready\n"
START_TIMEOUT_S = 60.0
# A projector that was serving and exited is started again after RESTART_DELAY_S; one that
# exits before it is ready again and again waits longer each time, up to MAX_RESTART_DELAY_S.
RESTART_DELAY_S = 0.2
MAX_RESTART_DELAY_S = 30.0
STOP_TIMEOUT_S = 20.0
# How often a standing-by projector tries the election, and the active one checks it holds it.
ELECTION_POLL_S = 1.0


def projector_store(settings: Settings) -> LedgerStore:
    """A store whose writer only runs the follower's steps (it appends nothing).

    Its commits are not synced on SQLite (``synchronous=NORMAL``): the views and their
    checkpoint commit together, so a power loss can only take the last steps back, which the
    projector then applies again; the log's own commits stay FULL (the server's writer)."""
    return LedgerStore(
        settings.resolved_database_url,
        default_catalogue(),
        [],
        synchronous="NORMAL",
        busy_timeout_ms=settings.busy_timeout_ms,
        # The views', the mirror's and the health checks' followers each read pages.
        read_pool_size=3,
    )


async def _stdin_closed() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.read(4096):
        pass


def build_mirror(settings: Settings, store: LedgerStore) -> MirrorFollower:
    return build_follower(
        store=store, mirror_dir=settings.resolved_mirror_dir, areas=default_mirror_areas()
    )


class _Follower(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def projector_followers(settings: Settings, store: LedgerStore) -> list[_Follower]:
    """What the projector runs: the views' follower, the mirror's (when the mirror is on) and
    the health checks' (when they are on and this is where they run)."""
    followers: list[_Follower] = [ProjectionFollower(store, view_projectors())]
    if settings.mirror_enabled:
        followers.append(build_mirror(settings, store))
    if settings.health_follower_home == "projector":
        followers.append(HealthFollower(store))
    return followers


async def run_projector(settings: Settings, *, until_stdin_closes: bool) -> None:
    """Run the followers while this process holds the projector's election; stand by while
    another does (``ledger serve --workers N`` starts N projectors, replicas on PostgreSQL one
    each: one follows the log, the others take over when it dies)."""
    store = projector_store(settings)
    await store.open()
    election = projector_election_for(settings.resolved_database_url)
    ended: asyncio.Future[object] = asyncio.ensure_future(
        _stdin_closed() if until_stdin_closes else asyncio.Event().wait()  # until interrupted
    )
    try:
        sys.stdout.buffer.write(READY_LINE)
        sys.stdout.buffer.flush()
        standing_by = False
        while not ended.done():
            if not await election.try_acquire():
                if not standing_by:
                    log.info("projector: another projector is active; standing by")
                    standing_by = True
                await asyncio.wait({ended}, timeout=ELECTION_POLL_S)
                continue
            standing_by = False
            log.info("projector: active")
            await _follow_while_elected(settings, store, election, ended)
    finally:
        ended.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ended
        await election.release()
        await store.close()


async def _follow_while_elected(
    settings: Settings, store: LedgerStore, election: Election, ended: asyncio.Future[object]
) -> None:
    followers = projector_followers(settings, store)
    try:
        for follower in followers:
            await follower.start()
        while not ended.done() and await election.still_held():
            await asyncio.wait({ended}, timeout=ELECTION_POLL_S)
        if not ended.done():
            log.warning("projector: the election was lost; standing by")
    finally:
        for follower in reversed(followers):
            await follower.stop()


class ProjectorProcess:
    """Runs ``ledger project`` beside the server and starts another when it exits."""

    def __init__(self, settings: Settings, command: Sequence[str] | None = None) -> None:
        self._command = tuple(
            command
            or (
                sys.executable,
                "-m",
                "ledger",
                "project",
                "--database-url",
                settings.resolved_database_url,
                "--serve-child",
            )
        )
        # The child reads the rest of its settings from the environment, as this process did;
        # what this process was given as options is handed on as variables.
        self._env = {
            **os.environ,
            "LEDGER_BUSY_TIMEOUT_MS": str(settings.busy_timeout_ms),
            "LEDGER_MIRROR_ENABLED": str(settings.mirror_enabled).lower(),
            "LEDGER_MIRROR_DIR": str(settings.resolved_mirror_dir.resolve()),
            "LEDGER_HEALTH_FINDINGS_ENABLED": str(settings.health_findings_enabled).lower(),
            "LEDGER_PROJECTOR": "process",
        }
        self._task: asyncio.Task[None] | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._closing = False
        self._ready = False
        self.starts = 0

    @property
    def pid(self) -> int | None:
        process = self._process
        return None if process is None or process.returncode is not None else process.pid

    async def start(self) -> None:
        if self._task is None:
            self._closing = False
            self._task = asyncio.create_task(self._run(), name="ledger-projector-process")

    async def stop(self) -> None:
        self._closing = True
        process = self._process
        if process is not None and process.returncode is None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                log.error("the projector did not exit in %.0f s: killed", STOP_TIMEOUT_S)
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
            self._ready = False
            try:
                await self._once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the projector failed")
            if self._closing:
                return
            if self._ready:
                pause = RESTART_DELAY_S  # it was serving: not a crash loop
            log.error("the projector exited: another in %.1f s", pause)
            await asyncio.sleep(pause)
            if not self._ready:
                pause = min(MAX_RESTART_DELAY_S, pause * 2)

    async def _once(self) -> None:
        process = await asyncio.create_subprocess_exec(
            *self._command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self._env,
        )
        self._process = process
        self.starts += 1
        assert process.stdout is not None
        try:
            ready = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
            if ready != READY_LINE:
                raise RuntimeError(f"the projector answered {ready!r}")
            self._ready = True
            while await process.stdout.read(4096):
                pass
            await process.wait()
        finally:
            if process.returncode is None and not self._closing:
                process.kill()
                await process.wait()
