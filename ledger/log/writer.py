"""The single writer: one task, one connection, group commit.

Callers enqueue a command and await its future. The writer takes everything queued (bounded by
count and bytes), applies it in ONE transaction (each command inside its own savepoint, so a
failing command fails only itself), commits, and only then answers every caller: one fsync
serves the whole batch, and an answer always means the commit is durable.

On PostgreSQL the same loop runs in every replica; a transaction-scoped advisory lock taken
first serialises appends across replicas, so `seq` is gapless and commits land in seq order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from ledger.log.commit_signal import CommitSignal
from ledger.log.engines import sqlite_path
from ledger.log.errors import (
    LedgerError,
    StorageDamaged,
    StorageUnavailable,
    WriterStopped,
    damage_of,
)
from ledger.log.events import Catalogue
from ledger.log.projector import Projector
from ledger.log.rollout_cache import RolloutCache
from ledger.log.savepoints import CommandSavepoints
from ledger.log.transaction import WriteTransaction, read_head
from ledger.log.wal_checkpoints import WalCheckpoints
from ledger.log.wal_size_limit import WalSizeLimit
from ledger.log.writer_lock import WriterLock

log = logging.getLogger(__name__)

T = TypeVar("T")
Command = Callable[[WriteTransaction], T]

# Key of the PostgreSQL advisory lock that orders appends across replicas ("LEDGER01").
APPEND_LOCK_KEY = 0x4C45444745523031


class WriterMetrics(Protocol):
    def observe_batch(self, size: int, commit_seconds: float, events: int) -> None: ...

    def set_queue_depth(self, depth: int) -> None: ...

    def count_failed_batch(self) -> None: ...


class BatchRunner(Protocol):
    """Runs a synchronous batch function on the write connection."""

    async def run(self, fn: Callable[[Connection], T]) -> T: ...

    async def close(self) -> None: ...


class SQLiteRunner:
    """Runs batches on a dedicated thread with a synchronous sqlite3 connection.

    Statements in the hot path cost microseconds in-thread; hopping threads per statement
    (as an async driver does) would cost far more than the SQL itself.
    """

    def __init__(
        self,
        engine: Engine,
        lock: WriterLock | None = None,
        *,
        checkpoints: WalCheckpoints | None,
    ) -> None:
        """``engine``: a writer engine (engines.py), whose commits leave the WAL's checkpoints
        to a runner: ``checkpoints`` runs them after a batch, once the lock is released and the
        batch's callers are answered (wal_checkpoints.py); None leaves them to another
        process's writer (a server's, to its projector's). The WAL file is cut back a step at a
        time whichever writer starts it over (wal_size_limit.py)."""
        self._engine = engine
        # Taken around each batch when the database is a file (see writer_lock.py).
        self._lock = lock
        self._checkpoints = checkpoints
        self._wal_size_limit = WalSizeLimit(sqlite_path(engine.url) + "-wal")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-writer")

    def _run_sync(self, fn: Callable[[Connection], T]) -> T:
        self._wal_size_limit.apply(self._engine)
        if self._lock is None:
            with self._engine.connect() as conn:
                return fn(conn)
        with self._lock.held(), self._engine.connect() as conn:
            return fn(conn)

    async def run(self, fn: Callable[[Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._run_sync, fn)
        finally:
            checkpoints = self._checkpoints
            if checkpoints is not None and checkpoints.due():
                # Not awaited: the writer's thread runs it before the next batch.
                self._executor.submit(checkpoints.run, self._engine)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._engine.dispose)
        self._executor.shutdown(wait=True)
        if self._lock is not None:
            self._lock.close()


class AsyncEngineRunner:
    """Runs batches through an async engine (PostgreSQL/asyncpg) via ``run_sync``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def run(self, fn: Callable[[Connection], T]) -> T:
        async with self._engine.connect() as conn:
            return await conn.run_sync(fn)

    async def close(self) -> None:
        await self._engine.dispose()


@dataclass
class _Pending(Generic[T]):
    command: Command[T]
    future: asyncio.Future[T]
    size: int


@dataclass
class _Outcome:
    ok: bool
    value: Any = None
    error: BaseException | None = None


@dataclass
class _BatchResult:
    outcomes: list[_Outcome] = field(default_factory=list)
    events: int = 0


_STOP = object()


def translate_driver_error(exc: BaseException) -> BaseException:
    if isinstance(exc, LedgerError):
        return exc
    if isinstance(exc, DBAPIError):
        return StorageUnavailable(f"database error: {exc.orig!s}")
    return exc


class Writer:
    def __init__(
        self,
        runner: BatchRunner,
        catalogue: Catalogue,
        projectors: list[Projector],
        *,
        advisory_lock: bool,
        max_batch: int,
        max_batch_bytes: int,
        metrics: WriterMetrics | None = None,
        max_queue: int = 100_000,
    ) -> None:
        self._runner = runner
        self._catalogue = catalogue
        self._projectors = projectors
        self._advisory_lock = advisory_lock
        self._max_batch = max_batch
        self._max_batch_bytes = max_batch_bytes
        self._metrics = metrics
        self._queue: asyncio.Queue[_Pending[Any] | object] = asyncio.Queue(max_queue)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._rollouts = RolloutCache()
        # Notified after each commit that appended events (log/commit_signal.py).
        self.commits = CommitSignal()
        # Set when the database reports damage: from then on no command is run (a damaged
        # file must not take more writes) and /readyz fails, until the store is restored.
        self.damaged: str | None = None

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="ledger-writer")

    async def stop(self) -> None:
        if self._task is not None and not self._stopping:
            self._stopping = True
            await self._queue.put(_STOP)
            await self._task
        await self._runner.close()

    async def execute(self, command: Command[T], *, size_hint: int = 0) -> T:
        """Run ``command`` in the next batch; return once its commit is durable."""
        if self.damaged is not None:
            raise self._damaged_error()
        if self._task is None or self._stopping or self._task.done():
            raise WriterStopped("the ledger writer is not running")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(command, future, max(size_hint, 1)))
        return await future

    async def _loop(self) -> None:
        stop = False
        while not stop:
            first = await self._queue.get()
            if first is _STOP:
                break
            assert isinstance(first, _Pending)
            batch: list[_Pending[Any]] = [first]
            size = first.size
            while len(batch) < self._max_batch and size < self._max_batch_bytes:
                try:
                    item = self._queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
                if item is _STOP:
                    stop = True
                    break
                assert isinstance(item, _Pending)
                batch.append(item)
                size += item.size
            if self._metrics is not None:
                self._metrics.set_queue_depth(self._queue.qsize())
            # A caller that gave up before its batch started is not applied: nobody waits for it.
            batch = [p for p in batch if not p.future.cancelled()]
            if batch:
                await self._run_batch(batch)

    async def _run_batch(self, batch: list[_Pending[Any]]) -> None:
        started = time.perf_counter()
        try:
            result = await self._runner.run(lambda conn: self._apply(conn, batch))
        except BaseException as exc:  # the commit failed: no command in the batch happened
            if self._metrics is not None:
                self._metrics.count_failed_batch()
            error = self._translate(exc)
            if isinstance(error, StorageDamaged):
                log.error("ledger writer batch of %d failed: %s", len(batch), error.message)
            else:
                log.exception("ledger writer batch of %d failed", len(batch))
            for pending in batch:
                if not pending.future.done():
                    pending.future.set_exception(error)
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
            return
        if self._metrics is not None:
            self._metrics.observe_batch(len(batch), time.perf_counter() - started, result.events)
        if result.events:
            self.commits.notify()
        for pending, outcome in zip(batch, result.outcomes, strict=True):
            if pending.future.done():
                continue
            if outcome.ok:
                pending.future.set_result(outcome.value)
            else:
                assert outcome.error is not None
                pending.future.set_exception(outcome.error)

    def _translate(self, exc: BaseException) -> BaseException:
        damage = damage_of(exc)
        if damage is not None:
            self.damaged = damage
            return self._damaged_error()
        return translate_driver_error(exc)

    def _damaged_error(self) -> StorageDamaged:
        return StorageDamaged(
            f"the database is damaged ({self.damaged}); appends are stopped: restore it from "
            "a backup (docs/operations.md, 'A damaged store')"
        )

    def _apply(self, conn: Connection, batch: list[_Pending[Any]]) -> _BatchResult:
        try:
            return self._apply_batch(conn, batch)
        except BaseException:
            # Nothing of this batch was committed: the rows it remembered are not true.
            self._rollouts.clear()
            raise

    def _apply_batch(self, conn: Connection, batch: list[_Pending[Any]]) -> _BatchResult:
        result = _BatchResult()
        with conn.begin():
            if self._advisory_lock:
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": APPEND_LOCK_KEY})
            # Read the head inside the lock: another process may have appended since our last batch.
            head = read_head(conn)
            self._rollouts.begin(head)
            tx = WriteTransaction(
                conn,
                head,
                self._catalogue,
                self._projectors,
                self._rollouts,
            )
            savepoints = CommandSavepoints(conn)
            try:
                for pending in batch:
                    before = tx.head
                    savepoints.open()
                    try:
                        value = pending.command(tx)
                        tx.end_command()
                    except Exception as exc:
                        savepoints.undo()
                        tx.rollback_to(before)
                        result.outcomes.append(_Outcome(ok=False, error=self._translate(exc)))
                    else:
                        savepoints.keep()
                        result.outcomes.append(_Outcome(ok=True, value=value))
                        result.events += tx.head.seq - before.seq
                # One INSERT of the batch's event rows. The boundary checked what each row
                # holds, so a refusal here is the database's (full, damaged): like a failed
                # commit, it fails every command of the batch and none of them happened.
                tx.write_events()
            finally:
                savepoints.close()
        self._rollouts.committed(tx.head)
        return result
