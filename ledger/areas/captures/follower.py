"""Following a live Gym ``model_call_capture_dir``: every new complete line becomes an event
within a second, and the directory's state on disk is the rollout's state in the ledger.

The follower catches up with the directory first (progress and a summary), then waits for
changes (inotify, or polling) and looks again at the rollouts whose files changed:
- new complete lines of ``<id>.capture.jsonl`` are ingested as the one-shot importer ingests
  them (captured, or damaged evidence counted as today's import counts it) with the file's
  checkpoint advanced in the same transaction (follow_commands.py);
- a followed file that is gone or replaced (Gym's pre-dispatch clear unlinks it, and the next
  call creates it again) becomes a clear, and the files now present are read from their start;
- a new ``<id>.capture.incomplete`` marks the rollout incomplete. ``-a<n>`` attempt files are
  rollout ids of their own, as in Gym;
- new complete lines of Gym's ``<id>.tokens.intents`` are recorded as intents (once per call
  id, so a file read again from its start records nothing new); its other token-store files
  (``.tokens.jsonl``, ``.tokens.lock``, ...) are not read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ledger.app.metrics import LedgerMetrics
from ledger.areas.captures.follow_commands import (
    INTENTS_KIND,
    clear_command,
    ingest_command,
    intents_command,
    load_checkpoints,
    marker_command,
)
from ledger.areas.captures.follow_files import (
    EMPTY_SHA256,
    FileCheckpoint,
    RolloutRead,
    capture_name,
    intents_name,
    marker_name,
    read_intents,
    read_rollout,
    rollout_of,
)
from ledger.areas.captures.watch import Watcher, open_watcher
from ledger.gym.ids import is_valid_rollout_id
from ledger.log.store import LedgerStore

log = logging.getLogger(__name__)

# A rollout whose checkpoint moved under us (another follower) is looked at again this often.
MAX_STALE_RETRIES = 5
Progress = Callable[[int, int], None]  # (bytes done, bytes to catch up)


@dataclass
class FollowStats:
    files: int = 0
    rollouts: set[str] = field(default_factory=set)
    lines: int = 0
    captured: int = 0
    damaged: int = 0
    already_present: int = 0
    conflicting_ids: int = 0
    markers: int = 0
    clears: int = 0
    intents: int = 0
    unreadable_intents: int = 0
    bytes: int = 0
    skipped_files: set[str] = field(default_factory=set)

    def summary(self) -> str:
        return (
            f"{self.files} files, {len(self.rollouts)} rollouts, {self.lines} lines: "
            f"{self.captured} captured, {self.damaged} damaged (kept as evidence), "
            f"{self.already_present} already present, {self.markers} incomplete markers, "
            f"{self.clears} clears, {self.intents} intents"
        )


@dataclass(frozen=True)
class _Seen:
    """A directory entry as a scan saw it (what polling compares)."""

    identity: str
    size: int
    mtime_ns: int


@dataclass
class FollowOptions:
    force_polling: bool = False
    poll_interval: float = 0.25
    # With inotify, a full rescan this often anyway (cheap; covers anything a watch missed).
    rescan_interval: float = 10.0
    concurrency: int = 32


class CaptureDirFollower:
    def __init__(
        self,
        store: LedgerStore,
        directory: Path,
        *,
        options: FollowOptions | None = None,
        metrics: LedgerMetrics | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.store = store
        self.directory = directory.resolve()
        self.key = str(self.directory)
        self.options = options or FollowOptions()
        self.metrics = metrics
        self.progress = progress
        self.catch_up = FollowStats()
        self.total = FollowStats()
        self.caught_up = asyncio.Event()
        self.mode = "starting"
        self._checkpoints: dict[str, FileCheckpoint] = {}
        self._sizes: dict[str, int] = {}
        self._behind_since: dict[str, float] = {}
        self._seen: dict[str, _Seen] = {}
        self._task: asyncio.Task[None] | None = None
        self._watcher: Watcher | None = None
        self._catch_up_total = 0
        self._catch_up_done = 0
        self._catching_up = False
        # Rollouts being looked at, and those to look at again when that ends (_schedule).
        self._running: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._limit = asyncio.Semaphore(self.options.concurrency)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"follow {self.key}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for task in list(self._running.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None

    async def wait(self) -> None:
        """Until the follower ends (only on an error it cannot recover from)."""
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        warned = False
        while not self.directory.is_dir():
            if not warned:
                log.warning("capture dir %s does not exist yet; waiting for it", self.key)
                warned = True
            await asyncio.sleep(self.options.poll_interval)  # poll: wait for Gym to create it
        # The watch starts before the first scan, so no change between the two is missed.
        self._watcher = open_watcher(
            self.directory,
            force_polling=self.options.force_polling,
            poll_interval=self.options.poll_interval,
        )
        self.mode = self._watcher.mode
        started = time.monotonic()
        self._checkpoints = await self.store.read_sync(
            lambda conn: load_checkpoints(conn, self.key)
        )
        await self._catch_up()
        log.info(
            "capture dir %s caught up in %.1fs: %s; following (%s)",
            self.key,
            time.monotonic() - started,
            self.catch_up.summary(),
            self.mode,
        )
        self.caught_up.set()
        last_scan = time.monotonic()
        while True:
            names = await self._watcher.changes(wait_at_most=1.0)
            now = time.monotonic()
            if names is None or now - last_scan >= self.options.rescan_interval:
                rollouts = self._scan_changes()
                last_scan = now
            else:
                rollouts = self._rollouts_of(names)
            self._schedule(rollouts, self.total)
            self._publish_metrics()

    # -- scanning ---------------------------------------------------------------------------

    def _scan(self) -> dict[str, _Seen]:
        seen: dict[str, _Seen] = {}
        try:
            entries = os.scandir(self.directory)
        except FileNotFoundError:
            return seen
        with entries:
            for entry in entries:
                if self._rollout_to_follow(entry.name) is None:
                    continue
                try:
                    stat = entry.stat()
                except FileNotFoundError:
                    continue
                seen[entry.name] = _Seen(
                    f"{stat.st_dev}:{stat.st_ino}", stat.st_size, stat.st_mtime_ns
                )
        return seen

    def _scan_changes(self) -> set[str]:
        """The rollouts whose files differ from the previous scan (or from their checkpoints)."""
        seen = self._scan()
        names = {name for name, entry in seen.items() if self._seen.get(name) != entry}
        names |= set(self._seen) - set(seen)
        names |= {name for name in self._checkpoints if name not in seen}
        now = time.monotonic()
        for name, entry in seen.items():
            self._sizes[name] = entry.size
            checkpoint = self._checkpoints.get(name)
            behind = entry.size > (checkpoint.byte_offset if checkpoint is not None else 0)
            if behind and name.endswith(".jsonl"):
                self._behind_since.setdefault(name, now)
        for name in set(self._sizes) - set(seen):
            self._sizes.pop(name, None)
        self._seen = seen
        return self._rollouts_of(names)

    def _rollout_to_follow(self, name: str) -> str | None:
        """The rollout id of a capture file or marker; None for other names (an invalid id is
        skipped with a warning, once, as the one-shot import reports it)."""
        rollout_id = rollout_of(name)
        if rollout_id is None:
            return None
        if not is_valid_rollout_id(rollout_id):
            if name not in self.total.skipped_files:
                log.warning("capture dir %s: skipped %s: not a valid rollout id", self.key, name)
                self.total.skipped_files.add(name)
            return None
        return rollout_id

    def _rollouts_of(self, names: Iterable[str]) -> set[str]:
        rollouts = set()
        now = time.monotonic()
        for name in names:
            rollout_id = self._rollout_to_follow(name)
            if rollout_id is not None:
                rollouts.add(rollout_id)
                if name.endswith(".jsonl"):
                    self._behind_since.setdefault(name, now)
        return rollouts

    async def _catch_up(self) -> None:
        self._catching_up = True
        rollouts = self._scan_changes()
        self._catch_up_total = sum(
            max(0, size - (self._checkpoints[n].byte_offset if n in self._checkpoints else 0))
            for n, size in self._sizes.items()
            if n.endswith(".jsonl")
        )
        self._catch_up_done = 0
        if self.progress is not None:
            self.progress(0, self._catch_up_total)
        await self._reconcile_all(rollouts, self.catch_up)
        self._catching_up = False
        self._publish_metrics()

    # -- one rollout ------------------------------------------------------------------------

    def _schedule(self, rollouts: set[str], stats: FollowStats) -> None:
        """Look at each rollout as soon as a slot is free, without waiting for the others: a
        rollout already being looked at is looked at once more when that ends (its new lines
        may have landed after the read). No pass waits for its slowest rollout, and the
        rollouts in flight together are committed by the writer as one group."""
        for rollout_id in rollouts:
            if rollout_id in self._running:
                self._again.add(rollout_id)
            else:
                self._running[rollout_id] = asyncio.create_task(self._follow(rollout_id, stats))

    async def _follow(self, rollout_id: str, stats: FollowStats) -> None:
        try:
            async with self._limit:
                while True:
                    try:
                        await self._reconcile(rollout_id, stats)
                    except Exception:
                        # One rollout's trouble (a database hiccup) must not stop the others;
                        # the next rescan looks at it again.
                        log.exception(
                            "capture dir %s: rollout %s failed; retrying later",
                            self.key,
                            rollout_id,
                        )
                        self._seen.pop(capture_name(rollout_id), None)
                    if rollout_id not in self._again:
                        return
                    self._again.discard(rollout_id)
        finally:
            self._running.pop(rollout_id, None)

    async def _reconcile_all(self, rollouts: set[str], stats: FollowStats) -> None:
        """Schedule ``rollouts`` and wait until nothing is in flight any more."""
        self._schedule(rollouts, stats)
        while self._running:
            await asyncio.gather(*list(self._running.values()))

    async def _reload(self, rollout_id: str) -> None:
        fresh = await self.store.read_sync(
            lambda conn: load_checkpoints(conn, self.key, rollout_id)
        )
        for name in (capture_name(rollout_id), marker_name(rollout_id), intents_name(rollout_id)):
            self._checkpoints.pop(name, None)
        self._checkpoints.update(fresh)

    async def _reconcile(self, rollout_id: str, stats: FollowStats) -> None:
        for _ in range(MAX_STALE_RETRIES):
            if await self._reconcile_once(rollout_id, stats):
                return
            await self._reload(rollout_id)
        log.warning(
            "capture dir %s: rollout %s keeps moving under another follower", self.key, rollout_id
        )

    async def _reconcile_once(self, rollout_id: str, stats: FollowStats) -> bool:
        """False when a checkpoint was not what the database has (reload and look again)."""
        cap_name, mark_name = capture_name(rollout_id), marker_name(rollout_id)
        while True:
            capture = self._checkpoints.get(cap_name)
            marker = self._checkpoints.get(mark_name)
            read: RolloutRead = await asyncio.to_thread(
                read_rollout, self.directory, rollout_id, capture, marker
            )
            if read.replaced:
                expected = [c for c in (capture, marker) if c is not None]
                cleared = await self.store.execute(clear_command(self.key, rollout_id, expected))
                if cleared is None:
                    return False
                self._checkpoints.pop(cap_name, None)
                self._checkpoints.pop(mark_name, None)
                stats.clears += int(cleared)
                stats.rollouts.add(rollout_id)
                continue
            if read.capture_identity is not None:
                self._sizes[cap_name] = read.capture_size
            if read.end > read.start:
                assert read.capture_identity is not None
                new = FileCheckpoint(
                    file_name=cap_name,
                    rollout_id=rollout_id,
                    kind="capture",
                    identity=read.capture_identity,
                    head_sha256=read.head_sha256,
                    head_length=read.head_length,
                    byte_offset=read.end,
                    lines=(capture.lines if capture is not None else 0) + len(read.lines),
                    serial=capture.serial if capture is not None else uuid.uuid4().hex,
                )
                outcome = await self.store.execute(
                    ingest_command(self.key, capture, new, read.lines),
                    size_hint=read.end - read.start,
                )
                if outcome is None:
                    return False
                self._checkpoints[cap_name] = new
                if capture is None:
                    stats.files += 1
                stats.rollouts.add(rollout_id)
                stats.lines += outcome.lines
                stats.captured += outcome.captured
                stats.damaged += outcome.damaged
                stats.already_present += outcome.already_present
                stats.conflicting_ids += outcome.conflicting_ids
                stats.bytes += read.end - read.start
                self._advance_progress(read.end - read.start)
                if self.metrics is not None:
                    self.metrics.follow_lines.labels(self.key).inc(outcome.lines)
                if read.end < read.capture_size:
                    continue  # more complete lines may follow (a chunk is bounded)
            if read.capture_identity is None or read.end >= read.capture_size:
                self._behind_since.pop(cap_name, None)
            if read.marker_identity is not None and marker is None:
                new_marker = FileCheckpoint(
                    file_name=mark_name,
                    rollout_id=rollout_id,
                    kind="marker",
                    identity=read.marker_identity,
                    head_sha256=EMPTY_SHA256,
                    head_length=0,
                    byte_offset=0,
                    lines=0,
                    serial=uuid.uuid4().hex,
                )
                changed = await self.store.execute(marker_command(self.key, new_marker))
                if changed is None:
                    return False
                self._checkpoints[mark_name] = new_marker
                stats.files += 1
                stats.markers += int(changed)
                stats.rollouts.add(rollout_id)
            return await self._follow_intents(rollout_id, stats)

    async def _follow_intents(self, rollout_id: str, stats: FollowStats) -> bool:
        """New complete lines of the rollout's intents file, as intents. False when its
        checkpoint was not what the database has."""
        name = intents_name(rollout_id)
        while True:
            checkpoint = self._checkpoints.get(name)
            read = await asyncio.to_thread(read_intents, self.directory, rollout_id, checkpoint)
            if read.identity is None:
                if checkpoint is None:
                    return True
                # Gone (Gym's drop or delete): the checkpoint goes, the intents stay.
                gone = intents_command(self.key, rollout_id, name, checkpoint, None, [])
                if await self.store.execute(gone) is None:
                    return False
                self._checkpoints.pop(name, None)
                return True
            if (
                checkpoint is not None
                and checkpoint.identity == read.identity
                and checkpoint.byte_offset == read.end
            ):
                return True
            new = FileCheckpoint(
                file_name=name,
                rollout_id=rollout_id,
                kind=INTENTS_KIND,
                identity=read.identity,
                head_sha256=EMPTY_SHA256,
                head_length=0,
                byte_offset=read.end,
                lines=(checkpoint.lines if read.start else 0) + len(read.lines)
                if checkpoint is not None
                else len(read.lines),
                serial=checkpoint.serial if checkpoint is not None else uuid.uuid4().hex,
            )
            command = intents_command(self.key, rollout_id, name, checkpoint, new, read.lines)
            outcome = await self.store.execute(command)
            if outcome is None:
                return False
            self._checkpoints[name] = new
            if checkpoint is None:
                stats.files += 1
            stats.rollouts.add(rollout_id)
            stats.intents += outcome.recorded
            stats.unreadable_intents += outcome.unreadable
            if read.end >= read.size:
                return True

    # -- progress and metrics ---------------------------------------------------------------

    def _advance_progress(self, size: int) -> None:
        if not self._catching_up:
            return
        self._catch_up_done += size
        if self.progress is not None:
            self.progress(self._catch_up_done, self._catch_up_total)

    def lag(self) -> tuple[int, int, float]:
        """(files followed, bytes not yet ingested, seconds since the oldest unread change)."""
        files = len(self._sizes)
        lag_bytes = sum(
            max(0, size - (self._checkpoints[n].byte_offset if n in self._checkpoints else 0))
            for n, size in self._sizes.items()
            if n.endswith(".jsonl")
        )
        oldest = min(self._behind_since.values(), default=None)
        seconds = time.monotonic() - oldest if oldest is not None else 0.0
        return files, lag_bytes, seconds

    def _publish_metrics(self) -> None:
        if self.metrics is None:
            return
        files, lag_bytes, seconds = self.lag()
        self.metrics.follow_files.labels(self.key).set(files)
        self.metrics.follow_lag_bytes.labels(self.key).set(lag_bytes)
        self.metrics.follow_lag_seconds.labels(self.key).set(seconds)
