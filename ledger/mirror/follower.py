"""The mirror follower: tails the event log by seq and keeps Gym's JSONL files.

Crash safety: the checkpoint (in the database) says every event up to it is in the files. Events
after it may be half-applied when the process dies (a line appended, the checkpoint not yet
advanced). So on every start, and after any error, the follower first rewrites from the database
every rollout touched by an event after the checkpoint, until the files agree with the database
at a head H (sync.py's ``catch_up_files``: a page of rollouts a snapshot, the ones touched
meanwhile again from a last one), and sets the checkpoint to H; only then does it tail from H.
Whatever moment the kill came, the files end up exactly as the database says: no line missing,
none doubled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from ledger.log.events import Catalogue
from ledger.log.private_files import make_private_dir
from ledger.log.queries import head_seq, read_events
from ledger.log.records import StoredEvent
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.mirror.base import MirrorArea
from ledger.mirror.checkpoint import load_checkpoint, write_checkpoint
from ledger.mirror.election import Election
from ledger.mirror.files import PageFiles
from ledger.mirror.sync import area_directory, catch_up_files, fsync_parents, snapshot

log = logging.getLogger(__name__)


class MirrorFollower:
    def __init__(
        self,
        *,
        store: LedgerStore,
        catalogue: Catalogue,
        areas: Sequence[MirrorArea],
        mirror_dir: Path,
        election: Election,
        page_size: int = 500,
        poll_seconds: float = 0.1,
        retry_seconds: float = 1.0,
        checkpoint_seconds: float = 0.5,
        stop_seconds: float = 10.0,
    ) -> None:
        self._store = store
        self._catalogue = catalogue
        self._areas = list(areas)
        self._mirror_dir = mirror_dir
        self._election = election
        self._page_size = page_size
        self._poll_seconds = poll_seconds
        self._retry_seconds = retry_seconds
        # Under load the checkpoint is saved (a write command) at most this often, not after
        # every page; it is saved whenever the follower goes idle. A checkpoint saved late only
        # widens what recovery rewrites: files stay exact. (The lag metrics are read from the
        # saved checkpoint when /metrics is scraped, whatever the follower is doing.)
        self._checkpoint_seconds = checkpoint_seconds
        self._stop_seconds = stop_seconds
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._checkpoint = 0
        self._saved_checkpoint = 0
        self._saved_at = 0.0
        self.is_leader = False

    async def start(self) -> None:
        if self._task is None:
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="ledger-mirror")

    async def stop(self) -> None:
        """Let the follower finish its current step, then stop it. Cancelling it in the middle
        of a read would leave the driver's thread finishing a query for a loop that may be
        closed by then; cancellation is only the fallback after ``stop_seconds``."""
        if self._task is not None:
            self._stopping.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._task), self._stop_seconds)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            self._task = None
        await self._election.release()
        self.is_leader = False

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once when asked to stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if not await self._election.try_acquire():
                    self.is_leader = False
                    await self._pause(self._retry_seconds)
                    continue
                self.is_leader = True
                await self._recover()
                while not self._stopping.is_set() and await self._election.still_held():
                    applied = await self._step()
                    now = time.monotonic()
                    if self._checkpoint != self._saved_checkpoint and (
                        not applied or now - self._saved_at >= self._checkpoint_seconds
                    ):
                        await self._save_checkpoint(self._checkpoint)
                    if not applied:
                        await self._pause(self._poll_seconds)
                self.is_leader = False
            except asyncio.CancelledError:
                raise
            except Exception:
                # The database or the disk failed us: start over from the checkpoint.
                log.exception("mirror follower failed; recovering from its checkpoint")
                await self._pause(self._retry_seconds)

    async def _recover(self) -> None:
        async with snapshot(self._store.read_engine) as conn:
            saved = await load_checkpoint(conn)
            head = await head_seq(conn)
        checkpoint = saved.seq
        if not saved.trusted:
            # A checkpoint of another epoch (the database was restored from a backup): its
            # seq may name other events, and files of rollouts the log no longer has may be
            # there. Every file is rewritten and every other file removed.
            log.warning("mirror: checkpoint of another epoch of the log; rebuilding")
            rebuilt = await catch_up_files(
                self._store.read_engine, self._mirror_dir, self._areas, after=None
            )
            head = rebuilt.head
            log.info("mirror: rebuilt %d rollouts (head %d)", rebuilt.rollouts, head)
            checkpoint = -1  # saved below, in this epoch
        elif head > checkpoint:
            rewritten = await catch_up_files(
                self._store.read_engine, self._mirror_dir, self._areas, after=checkpoint
            )
            head = rewritten.head
            log.info(
                "mirror: rewrote %d rollouts touched after seq %d (head %d)",
                rewritten.rollouts,
                checkpoint,
                head,
            )
        for area in self._areas:
            make_private_dir(area_directory(self._mirror_dir, area))
        if head != checkpoint:
            await self._save_checkpoint(head)
        self._checkpoint = self._saved_checkpoint = head

    async def _step(self) -> bool:
        async with self._store.read() as conn:
            page = await read_events(
                conn, self._catalogue, after=self._checkpoint, limit=self._page_size
            )
        if not page:
            return False
        await asyncio.to_thread(self._apply_page, page)
        self._checkpoint = page[-1].seq
        return True

    def _apply_page(self, page: list[StoredEvent]) -> None:
        files = PageFiles()
        for event in page:
            if event.rollout_id is None:
                continue
            for area in self._areas:
                if area.handles(event.kind):
                    area.apply(area_directory(self._mirror_dir, area), event, files)
        fsync_parents(files.finish())

    async def _save_checkpoint(self, seq: int) -> None:
        def command(tx: WriteTransaction) -> None:
            write_checkpoint(tx.conn, seq)

        await self._store.execute(command)
        self._saved_checkpoint = seq
        self._saved_at = time.monotonic()


def build_follower(
    *,
    store: LedgerStore,
    mirror_dir: Path,
    areas: Sequence[MirrorArea],
) -> MirrorFollower:
    """The follower for a store, with the election that fits its backend."""
    from ledger.mirror.election import election_for

    return MirrorFollower(
        store=store,
        catalogue=store.catalogue,
        areas=areas,
        mirror_dir=mirror_dir,
        election=election_for(store.url),
    )
