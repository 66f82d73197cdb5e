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

The views are written in the tables of a build (view_builds.py). Normally the follower applies
the log to the live build, whose checkpoints readers wait for. While an upgrade's build runs
beside it, the follower also applies the log to that build, from its own checkpoint, and the
step that brings it to the head swaps it in, in the same transaction. Meanwhile it keeps the
live build current too, taking turns with the build, when the live tables have the columns the
running code writes (an upgrade that changed only what the views derive) and are ahead of the
build; otherwise the live build is left as it was until the swap. The swap retires the old
build, whose tables the follower then drops a short step at a time (``drop_retired_step``):
back to back when the views are at the head, between their pages otherwise.

It runs in the projector process ``ledger serve`` starts (``ledger project``; projector.py of
the app), or as a task of the serving process (``LEDGER_PROJECTOR=in-server``), and on demand
(``catch_up``: ``ledger import``, ``ledger verify``, tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Row, Table, delete, func, inspect, select
from sqlalchemy.exc import DBAPIError, OperationalError

from ledger.log.commit_signal import CommitSignal
from ledger.log.errors import LedgerError, ViewsStopped
from ledger.log.projection_versions import record_versions
from ledger.log.projector import Projector
from ledger.log.records import StoredEvent
from ledger.log.replay import EventDecoder, Replay
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from ledger.log.transaction import WriteTransaction
from ledger.log.view_builds import (
    RETIRED_ROWS_PER_STEP,
    Builds,
    ViewBuild,
    drop_retired_step,
    is_lock_timeout,
    read_builds,
    swap_in,
    table_name,
    write_build_seq,
)
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
# How often the follower looks at the log when it has no full page to apply: idle, and between
# the small pages of a trickle of appends, so that a trickle costs a step a look rather than a
# step an append (each step is several statements, two transactions and thread hops). A reader
# waiting for the views asks for a look at once (``look_now``): the appends' acknowledgements
# never depend on the views, and a reader does not wait for this.
LOOK_EVERY_S = 0.1
RETRY_AFTER_FAILURE_S = 1.0
# While a build runs beside live views it keeps current, how often the live views get a step:
# a rollout read then waits for its events about this long at most, besides the step itself.
LIVE_TURN_S = 0.5
# While the views have events to apply, how often a retired build's tables get a step of their
# dropping (each a write transaction); an idle follower takes those steps one after another.
RETIRED_TURN_S = 0.1


@dataclass(frozen=True)
class Progress:
    projected: int
    head: int
    # What readers are told besides (``read_status``; ``read_progress`` leaves them out): the
    # event the views cannot apply, when one stopped them, and the head an upgrade's rebuild
    # must reach, while one runs.
    failing: ViewFailure | None = None
    rebuild_until: int | None = None
    # The build an upgrade started beside the live views, while it runs (its ``seq``: how far
    # it has applied the log).
    building: ViewBuild | None = None
    # Builds a swap retired whose tables are still to be dropped (``progress`` only).
    retired: tuple[int, ...] = ()

    @property
    def behind(self) -> int:
        return max(self.head - self.projected, 0)


def read_progress(conn: Connection, names: Sequence[str]) -> Progress:
    head = int(conn.execute(select(func.max(events.c.seq))).scalar() or 0)
    return Progress(projected=projected_seq(conn, names), head=head)


def read_status(conn: Connection, names: Sequence[str]) -> Progress:
    """``read_progress`` with the views' failure and build, in one snapshot."""
    progress = read_progress(conn, names)
    return Progress(
        projected=progress.projected,
        head=progress.head,
        failing=read_failure(conn, names),
        rebuild_until=rebuild_until(conn, names),
        building=read_builds(conn).building,
    )


# The views on the tables of a build (``None``: the stable tables, for checks of what they are).
ViewsOfBuild = Callable[[int | None], Sequence[Projector]]


@dataclass(frozen=True)
class _Target:
    """Where a step applies its page: the live build from the views' checkpoints, or the build
    running beside it from its own."""

    build: int
    after: int
    building: bool


def _still_at(conn: Connection, builds: Builds, names: Sequence[str], target: _Target) -> bool:
    """Whether ``target`` is still where the views of its build are (no other follower moved
    them, no swap made another build live)."""
    if target.building:
        building = builds.building
        return building is not None and (building.build, building.seq) == (
            target.build,
            target.after,
        )
    return builds.live.build == target.build and projected_seq(conn, names) == target.after


def _same_columns(conn: Connection, tables: Sequence[Table], build: int) -> bool:
    """Whether ``build``'s tables have the columns of the stable ``tables`` (the running
    code's), by name."""
    found = inspect(conn)
    return all(
        {str(column["name"]) for column in found.get_columns(table_name(table.name, build))}
        == set(table.columns.keys())
        for table in tables
    )


class _PageRefused(Exception):
    """A view raised while applying a page (its cause); the page's transaction rolls back."""


class ProjectionFollower:
    def __init__(
        self,
        store: LedgerStore,
        views_of: ViewsOfBuild,
        *,
        derived: Sequence[Table] = (),
        page_events: int = PAGE_EVENTS,
        look_every_s: float = LOOK_EVERY_S,
        live_turn_s: float = LIVE_TURN_S,
        retired_turn_s: float = RETIRED_TURN_S,
        retired_rows: int = RETIRED_ROWS_PER_STEP,
    ) -> None:
        """``views_of(build)``: fresh views on a build's tables. ``derived``: the tables
        computed from the views' rows (``Area.derived_from_views``), emptied when a build is
        swapped in, since they were computed from the old build's rows. ``live_turn_s``: while
        a build runs, how often the live views it keeps current get a step (0: whenever they
        are behind). ``retired_turn_s`` and ``retired_rows``: how often, while the views are
        busy, and by how many rows at most a step drops a retired build's tables."""
        views = list(views_of(None))
        if not views:
            raise ValueError("a projection follower needs at least one view")
        write_side = [view.name for view in views if not view.follows_log]
        if write_side:
            raise ValueError(
                f"the write side's projections run in the append, not behind it: "
                f"{', '.join(write_side)}"
            )
        self._store = store
        self._views_of = views_of
        # The views of the build the steps apply to, made again when that build changes.
        self._views: dict[int, list[Projector]] = {}
        # While a build runs: whether the live build takes this code's rows too (by builds),
        # and whose turn it is.
        self._keeps_live: dict[tuple[int, int], bool] = {}
        self._live_turn_s = live_turn_s
        self._live_turn_at = 0.0
        self._retired_turn_s = retired_turn_s
        self._retired_turn_at = 0.0
        self._retired_rows = retired_rows
        self.names = tuple(view.name for view in views)
        self._stable_tables = [table for view in views for table in view.tables]
        self._derived = list(derived)
        self._page_events = page_events
        self._look_every_s = look_every_s
        # Set by ``look_now`` (a reader waits for the views), cleared when a look begins.
        self._asked = asyncio.Event()
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
        """How far the views are, from the build this follower applies to: the live one's
        checkpoints, or the one being built."""

        def look(conn: Connection) -> Progress:
            progress = read_progress(conn, self.names)
            builds = read_builds(conn)
            building = builds.building
            if building is None:
                return Progress(progress.projected, progress.head, retired=builds.retired)
            return Progress(
                projected=building.seq,
                head=progress.head,
                building=building,
                retired=builds.retired,
            )

        return await self._store.read_sync(look)

    def _views_of_build(self, build: int) -> list[Projector]:
        views = self._views.get(build)
        if views is None:
            # At most the live build's and the one being built are kept.
            if len(self._views) >= 2:
                self._views.clear()
            views = self._views[build] = list(self._views_of(build))
        return views

    def _targets(self, conn: Connection, builds: Builds) -> list[_Target]:
        """Where this step may apply a page, in the order it tries them."""
        live = _Target(builds.live.build, projected_seq(conn, self.names), building=False)
        building = builds.building
        if building is None:
            return [live]
        build = _Target(building.build, building.seq, building=True)
        pair = (builds.live.build, building.build)
        if pair not in self._keeps_live:
            self._keeps_live = {pair: _same_columns(conn, self._stable_tables, pair[0])}
        # Live views behind the build would only be replaced by it: the build goes first.
        if not self._keeps_live[pair] or live.after <= build.after:
            return [build]
        # The live views get a turn at most every LIVE_TURN_S: each turn is a write transaction
        # of its own, and a turn every other step made the build take half as long again.
        now = time.monotonic()
        if now - self._live_turn_at < self._live_turn_s:
            return [build, live]
        self._live_turn_at = now
        return [live, build]

    async def step(self) -> int:
        """Apply one page: the number of events applied (0 when the views are at the head).
        ``ViewsStopped`` when a view cannot apply the next event (recorded in
        ``view_failures``)."""
        while True:
            target, rows = await self._store.read_sync(self._read_page)
            if not rows and not target.building:
                return 0  # at the head, and no build to swap in
            try:
                decoded = await asyncio.to_thread(self._decode_page, rows)
            except Exception as exc:  # the cause is in the events, as when a view refuses one
                await self._refused(rows, exc)
                continue
            try:
                applied: int | None = await self._store.execute(
                    functools.partial(self._apply_page, target, decoded)
                )
            except _PageRefused as exc:
                await self._refused(rows, exc.__cause__ or exc)
                continue
            if applied is not None:
                self.moved.notify()
                return applied
            if not rows:
                return 0  # the build was swapped in, here or by another follower
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

    def _read_page(self, conn: Connection) -> tuple[_Target, Sequence[Row[Any]]]:
        """The first target with events after it, and its page; with none, the build if one
        runs (at the head: a step with no events swaps it in), else the live views."""
        targets = self._targets(conn, read_builds(conn))
        for target in targets:
            after = target.after
            limit = 1 if after < self._one_at_a_time_through else self._page_events
            rows = conn.execute(
                select(events).where(events.c.seq > after).order_by(events.c.seq).limit(limit)
            ).all()
            if rows:
                return target, rows
        building = [target for target in targets if target.building]
        return (building or targets)[0], []

    def _decode_page(self, rows: Sequence[Row[Any]]) -> list[StoredEvent]:
        return [self._decode(row) for row in rows]

    def _apply_page(
        self, target: _Target, decoded: Sequence[StoredEvent], tx: WriteTransaction
    ) -> int | None:
        """The decoded page applied and the checkpoint moved, in the writer's transaction; None
        when the views are no longer where the page was read from. A build that reaches the
        head is swapped in (the page may be empty then)."""
        conn = tx.conn
        builds = read_builds(conn)
        if not _still_at(conn, builds, self.names, target):
            return None
        views = self._views_of_build(target.build)
        replay = Replay(conn, tx.catalogue, views)
        try:
            replay.apply_decoded(decoded)
        except BaseException as exc:
            for view in views:
                view.discard()
            # The database's own failure (I/O, a damaged file, a lost connection) is not the
            # events': it is raised as it is, for the writer to judge.
            if isinstance(exc, Exception) and not isinstance(exc, OperationalError):
                raise _PageRefused from exc
            raise
        reached = replay.last_seq if decoded else target.after
        if not target.building:
            # Kept current during a build, the live views still say that one runs.
            write_projected_seq(conn, self.names, reached, building=builds.building is not None)
        elif reached < tx.head.seq or not self._swap_in(conn, builds, reached, views):
            write_build_seq(conn, target.build, reached)
        clear_failures(conn, self.names)
        return replay.events

    def _swap_in(
        self, conn: Connection, builds: Builds, reached: int, views: Sequence[Projector]
    ) -> bool:
        """The build, at the head (under the append lock: no event can come between), becomes
        the live views: the stable names show its tables, the views' checkpoints are its own,
        its versions are recorded, and the tables computed from the old build's rows are
        emptied (their followers compute them again). False when readers of the live views
        held them past the swap's lock timeout (PostgreSQL): a later step tries again."""
        assert builds.building is not None
        started = time.perf_counter()
        try:
            with conn.begin_nested():
                for table in self._derived:
                    conn.execute(delete(table))
                swap_in(conn, self._stable_tables, builds)
                write_projected_seq(conn, self.names, reached)
                record_versions(conn, views)
        except DBAPIError as exc:
            if not is_lock_timeout(exc):
                raise
            log.warning(
                "views: build %d waits to be swapped in: readers hold the live views",
                builds.building.build,
            )
            return False
        log.info(
            "views: build %d swapped in at seq %d (the swap took %.3f s under the append lock)",
            builds.building.build,
            reached,
            time.perf_counter() - started,
        )
        return True

    async def drop_retired_step(self, build: int) -> bool:
        """One step of dropping a retired build's tables (view_builds.py): True when they are
        gone. False too when readers of them held them past the lock timeout (PostgreSQL); a
        later step tries again."""
        try:
            return await self._store.execute(
                lambda tx: drop_retired_step(
                    tx.conn, [t.name for t in self._stable_tables], build, rows=self._retired_rows
                )
            )
        except DBAPIError as exc:
            if not is_lock_timeout(exc):
                raise
            log.warning("views: retired build %d waits for readers of its tables", build)
            return False

    async def catch_up(self) -> int:
        """Apply pages until the views reach the head as it was when the last page was read,
        until a build of them running beside the live ones is swapped in, and until the tables
        of the builds it retired are dropped: the events applied."""
        total = 0
        while (applied := await self.step()) or (await self.progress()).building is not None:
            total += applied
        while retired := (await self.progress()).retired:
            await self.drop_retired_step(retired[0])
        return total

    async def start(self) -> None:
        if self._task is None:
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="ledger-projection-follower")

    def look_now(self) -> None:
        """A reader waits for the views: look at the log now rather than at the next look. A
        request made during a step takes effect when the step ends."""
        self._asked.set()

    async def stop(self) -> None:
        """Finish the current step, then stop."""
        if self._task is None:
            return
        self._stopping.set()
        self._asked.set()
        task, self._task = self._task, None
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while not self._stopping.is_set():
            self._asked.clear()
            try:
                # Looked at by a read first: a step is a write transaction, which an idle
                # follower must not take at every look.
                progress = await self.progress()
                # A build at the head still takes a step: the one that swaps it in.
                busy = progress.behind or progress.building is not None
                applied = await self.step() if busy else 0
                if progress.retired and self._retired_turn(busy=bool(applied)):
                    await self.drop_retired_step(progress.retired[0])
                    continue
            except LedgerError as exc:
                log.error("projection follower: %s; retrying", exc.message)
                await self._pause(RETRY_AFTER_FAILURE_S)
                continue
            except Exception:
                log.exception("projection follower step failed; retrying")
                await self._pause(RETRY_AFTER_FAILURE_S)
                continue
            if applied >= self._page_events or (
                applied and (progress.building is not None or progress.retired)
            ):
                # A full page: more are likely waiting. While a build runs, a step may have
                # given the live views their turn (a short page): the build goes on at once;
                # while a retired build's tables are left, their next turn comes as before.
                continue
            # At the head as of the page read: the next look, or sooner if a reader asks.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._asked.wait(), self._look_every_s)

    def _retired_turn(self, *, busy: bool) -> bool:
        """Whether a retired build's tables get a step now: always when the views are idle,
        else at most every ``retired_turn_s``, so that the pages the appends wait for come
        first."""
        now = time.monotonic()
        if busy and now - self._retired_turn_at < self._retired_turn_s:
            return False
        self._retired_turn_at = now
        return True

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
