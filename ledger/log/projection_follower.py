"""The follower that keeps the views current: the projections no command reads follow the log
from their checkpoint, behind the acknowledgement (docs/architecture.md, "Views follow the log").

Each step reads the views' checkpoint (view_checkpoints.py) and the events after it (a page) in
a read snapshot, and decodes them (payloads parsed, each kind's derivation run: replay.py's
``EventDecoder``) before it takes the write lock, which the appends share. Then one write
command reads the checkpoint again, applies the decoded page to the views (replay.py, the code
``ledger verify`` rebuilds with) and writes the new checkpoint, so the rows and the checkpoint
commit together. A step cut short (an error, a SIGKILL) leaves both as they were; the next one
applies the same page again, nothing lost or applied twice. Checking the checkpoint inside the
write transaction makes two followers on one database (two processes, two replicas on
PostgreSQL) safe: they take turns, and the second finds its page already applied, reads the
next and goes on. Events are immutable (``ledger compact`` only redacts payloads of generations
a tombstone already ended, whose rows every view drops), so a page decoded before the write
transaction is the page the transaction would have read.

It runs in the projector process ``ledger serve`` starts (``ledger project``; projector.py of
the app), or as a task of the serving process (``LEDGER_PROJECTOR=in-server``), and on demand
(``catch_up``: ``ledger import``, ``ledger verify``, tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Row, func, select
from sqlalchemy.exc import OperationalError

from ledger.log.commit_signal import CommitSignal
from ledger.log.errors import LedgerError, ViewsStopped
from ledger.log.projector import Projector
from ledger.log.records import StoredEvent
from ledger.log.replay import EventDecoder, Replay
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from ledger.log.transaction import WriteTransaction
from ledger.log.view_checkpoints import projected_seq, rebuild_until, write_projected_seq
from ledger.log.view_failures import (
    ViewFailure,
    clear_failures,
    describe_error,
    read_failure,
    record_failure,
)

log = logging.getLogger(__name__)

# Events per step: a step holds the log's write lock while it applies them (decoded before),
# so a page is what an append may wait behind.
PAGE_EVENTS = 500
# How often an idle follower looks for events appended by another process.
IDLE_POLL_S = 0.02
RETRY_AFTER_FAILURE_S = 1.0


@dataclass(frozen=True)
class Progress:
    projected: int
    head: int
    # What readers are told besides (``read_status``; ``read_progress`` leaves them out): the
    # event the views cannot apply, when one stopped them, and the head an upgrade's rebuild
    # must reach, while one runs.
    failing: ViewFailure | None = None
    rebuild_until: int | None = None

    @property
    def behind(self) -> int:
        return max(self.head - self.projected, 0)


def read_progress(conn: Connection, names: Sequence[str]) -> Progress:
    head = int(conn.execute(select(func.max(events.c.seq))).scalar() or 0)
    return Progress(projected=projected_seq(conn, names), head=head)


def read_status(conn: Connection, names: Sequence[str]) -> Progress:
    """``read_progress`` with the views' failure and rebuild, in one snapshot."""
    progress = read_progress(conn, names)
    return Progress(
        projected=progress.projected,
        head=progress.head,
        failing=read_failure(conn, names),
        rebuild_until=rebuild_until(conn, names),
    )


class _PageRefused(Exception):
    """A view raised while applying a page (its cause); the page's transaction rolls back."""


class ProjectionFollower:
    def __init__(
        self,
        store: LedgerStore,
        views: Sequence[Projector],
        *,
        page_events: int = PAGE_EVENTS,
        idle_poll_s: float = IDLE_POLL_S,
    ) -> None:
        if not views:
            raise ValueError("a projection follower needs at least one view")
        write_side = [view.name for view in views if not view.follows_log]
        if write_side:
            raise ValueError(
                f"the write side's projections run in the append, not behind it: "
                f"{', '.join(write_side)}"
            )
        self._store = store
        self._views = list(views)
        self.names = tuple(view.name for view in views)
        self._page_events = page_events
        self._idle_poll_s = idle_poll_s
        self._decode = EventDecoder(store.catalogue)
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        # Notified after each step that moved the views (readers waiting for them).
        self.moved = CommitSignal()
        # After a page failed: up to its last seq, a step applies one event (``_refused``).
        self._one_at_a_time_through = 0
        # The failing seq last logged with its traceback (the retries log one line each).
        self._reported_seq = 0

    async def progress(self) -> Progress:
        return await self._store.read_sync(lambda conn: read_progress(conn, self.names))

    async def step(self) -> int:
        """Apply one page: the number of events applied (0 when the views are at the head).
        ``ViewsStopped`` when a view cannot apply the next event (recorded in
        ``view_failures``)."""
        while True:
            after, rows = await self._store.read_sync(self._read_page)
            if not rows:
                return 0
            try:
                decoded = await asyncio.to_thread(self._decode_page, rows)
            except Exception as exc:  # the cause is in the events, as when a view refuses one
                await self._refused(rows, exc)
                continue
            try:
                applied: int | None = await self._store.execute(
                    functools.partial(self._apply_page, after, decoded)
                )
            except _PageRefused as exc:
                await self._refused(rows, exc.__cause__ or exc)
                continue
            if applied is not None:
                self.moved.notify()
                return applied
            # Another follower applied the page meanwhile: read the next one.

    async def _refused(self, rows: Sequence[Row[Any]], cause: BaseException) -> None:
        """A page the views could not apply. Its events are then applied one a step, so those
        before the one that fails are not held back and the failure names its event; that
        event's failure is recorded (``view_failures``) and raised as ``ViewsStopped``."""
        if len(rows) > 1:
            self._one_at_a_time_through = rows[-1].seq
            return
        seq = int(rows[0].seq)
        error = describe_error(cause)
        await self._store.execute(lambda tx: record_failure(tx.conn, self.names, seq, error))
        if seq != self._reported_seq:
            self._reported_seq = seq
            log.error("the views cannot apply the event at seq %d", seq, exc_info=cause)
        raise ViewsStopped(f"the views cannot apply the event at seq {seq}: {error}") from cause

    def _read_page(self, conn: Connection) -> tuple[int, Sequence[Row[Any]]]:
        after = projected_seq(conn, self.names)
        limit = 1 if after < self._one_at_a_time_through else self._page_events
        rows = conn.execute(
            select(events).where(events.c.seq > after).order_by(events.c.seq).limit(limit)
        ).all()
        return after, rows

    def _decode_page(self, rows: Sequence[Row[Any]]) -> list[StoredEvent]:
        return [self._decode(row) for row in rows]

    def _apply_page(
        self, after: int, decoded: Sequence[StoredEvent], tx: WriteTransaction
    ) -> int | None:
        """The decoded page applied and the checkpoint moved, in the writer's transaction; None
        when the views are no longer where the page was read from."""
        conn = tx.conn
        if projected_seq(conn, self.names) != after:
            return None
        replay = Replay(conn, tx.catalogue, self._views)
        try:
            replay.apply_decoded(decoded)
        except BaseException as exc:
            for view in self._views:
                view.discard()
            # The database's own failure (I/O, a damaged file, a lost connection) is not the
            # events': it is raised as it is, for the writer to judge.
            if isinstance(exc, Exception) and not isinstance(exc, OperationalError):
                raise _PageRefused from exc
            raise
        write_projected_seq(conn, self.names, replay.last_seq)
        clear_failures(conn, self.names)
        return replay.events

    async def catch_up(self) -> int:
        """Apply pages until the views reach the head as it was when the last page was read:
        the events applied."""
        total = 0
        while applied := await self.step():
            total += applied
        return total

    async def start(self) -> None:
        if self._task is None:
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="ledger-projection-follower")

    async def stop(self) -> None:
        """Finish the current step, then stop."""
        if self._task is None:
            return
        self._stopping.set()
        self._store.writer.commits.notify()
        task, self._task = self._task, None
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                # Looked at by a read first: a step is a write transaction, which an idle
                # follower must not take every few milliseconds.
                progress = await self.progress()
                applied = await self.step() if progress.behind else 0
            except LedgerError as exc:
                log.error("projection follower: %s; retrying", exc.message)
                await self._pause(RETRY_AFTER_FAILURE_S)
                continue
            except Exception:
                log.exception("projection follower step failed; retrying")
                await self._pause(RETRY_AFTER_FAILURE_S)
                continue
            if applied:
                continue
            # Idle: until this process's writer commits, or a while (another process may).
            await self._store.writer.commits.wait(self._idle_poll_s)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
