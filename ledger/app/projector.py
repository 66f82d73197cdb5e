"""The projector: the process that keeps the views current beside ``ledger serve``, and the
other followers of the log: the JSONL mirror and the health checks (health_findings).

``ledger serve`` starts it (``projector_child.py``, this module's ``run_projector``) and starts
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

from ledger.app.areas import default_catalogue, default_mirror_areas, views_follower
from ledger.app.config import Settings
from ledger.areas.health.follower import HealthFollower
from ledger.child_process import START_TIMEOUT_S, ChildProcess
from ledger.log.projection_follower import ProjectionFollower
from ledger.log.store import LedgerStore
from ledger.mirror.election import Election, projector_election_for
from ledger.mirror.follower import MirrorFollower, build_follower

log = logging.getLogger(__name__)

READY_LINE = b"projector ready\n"
# A projector that was serving and exited is started again after RESTART_DELAY_S; one that
# exits before it is ready again and again waits longer each time (child_process.py).
RESTART_DELAY_S = 0.2
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


# What the server writes to the projector's standard input when one of its readers waits for
# the views (``ProjectorProcess.look_now``): the views' follower then looks at the log at once.
LOOK_NOW = b"\n"
# Requests not yet read by the projector past this many bytes are not sent: one is enough.
LOOK_NOW_BUFFER_BYTES = 64


class _LookRequests:
    """The server's requests for a look at the log, passed on to the views' follower while
    this process follows the log (none while it stands by)."""

    def __init__(self) -> None:
        self.follower: ProjectionFollower | None = None

    def look_now(self) -> None:
        if self.follower is not None:
            self.follower.look_now()


async def _stdin_closed(requests: _LookRequests) -> None:
    """Until the server closes its pipe; each request it writes meanwhile asks for a look."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.read(4096):
        requests.look_now()


def build_mirror(settings: Settings, store: LedgerStore) -> MirrorFollower:
    return build_follower(
        store=store, mirror_dir=settings.resolved_mirror_dir, areas=default_mirror_areas()
    )


class _Follower(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def projector_followers(
    settings: Settings, store: LedgerStore, views: ProjectionFollower
) -> list[_Follower]:
    """What the projector runs: the views' follower, the mirror's (when the mirror is on) and
    the health checks' (when they are on and this is where they run)."""
    followers: list[_Follower] = [views]
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
    requests = _LookRequests()
    ended: asyncio.Future[object] = asyncio.ensure_future(
        # until interrupted, for `ledger project`
        _stdin_closed(requests) if until_stdin_closes else asyncio.Event().wait()
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
            await _follow_while_elected(settings, store, election, ended, requests)
    finally:
        ended.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ended
        await election.release()
        await store.close()


async def _follow_while_elected(
    settings: Settings,
    store: LedgerStore,
    election: Election,
    ended: asyncio.Future[object],
    requests: _LookRequests,
) -> None:
    views = views_follower(store, look_every_s=settings.views_look_every_s)
    followers = projector_followers(settings, store, views)
    try:
        for follower in followers:
            await follower.start()
        requests.follower = views
        while not ended.done() and await election.still_held():
            await asyncio.wait({ended}, timeout=ELECTION_POLL_S)
        if not ended.done():
            log.warning("projector: the election was lost; standing by")
    finally:
        requests.follower = None
        for follower in reversed(followers):
            await follower.stop()


class ProjectorProcess(ChildProcess):
    """Runs the projector (``ledger.app.projector_child``) beside the server and starts another
    when it exits."""

    def __init__(self, settings: Settings, command: Sequence[str] | None = None) -> None:
        super().__init__(
            "the projector",
            command
            or (
                sys.executable,
                "-m",
                "ledger.app.projector_child",
                "--database-url",
                settings.resolved_database_url,
            ),
            # The child reads the rest of its settings from the environment, as this process
            # did; what this process was given as options is handed on as variables.
            env={
                **os.environ,
                "LEDGER_BUSY_TIMEOUT_MS": str(settings.busy_timeout_ms),
                "LEDGER_MIRROR_ENABLED": str(settings.mirror_enabled).lower(),
                "LEDGER_MIRROR_DIR": str(settings.resolved_mirror_dir.resolve()),
                "LEDGER_HEALTH_FINDINGS_ENABLED": str(settings.health_findings_enabled).lower(),
                "LEDGER_VIEWS_LOOK_EVERY_S": str(settings.views_look_every_s),
                "LEDGER_PROJECTOR": "process",
            },
            restart_delay_s=RESTART_DELAY_S,
        )

    def look_now(self) -> None:
        """A reader of this server waits for the views: ask the projector to look at the log
        at once (it stands by when another process's projector is the active one, which
        then looks at its own pace)."""
        process = self._process
        if process is None or process.returncode is not None or process.stdin is None:
            return
        stdin = process.stdin
        if stdin.is_closing() or stdin.transport.get_write_buffer_size() > LOOK_NOW_BUFFER_BYTES:
            return
        stdin.write(LOOK_NOW)

    async def _talk(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        ready = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
        if ready != READY_LINE:
            raise RuntimeError(f"the projector answered {ready!r}")
        self._serving()
        while await process.stdout.read(4096):
            pass
