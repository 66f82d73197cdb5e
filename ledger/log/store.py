"""The store facade: one writer for appends, a pool of read-only connections for reads."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ledger.log import queries
from ledger.log.encoding import EncodedPayload
from ledger.log.engines import (
    Synchronous,
    create_async_db_engine,
    create_sqlite_reader_engine,
    create_sqlite_writer_engine,
    is_sqlite_url,
    sqlite_path,
)
from ledger.log.errors import StorageUnavailable
from ledger.log.events import Catalogue
from ledger.log.projector import Projector
from ledger.log.records import Appended, NewEvent, RolloutState, StoredEvent
from ledger.log.sync_reader import SyncReader
from ledger.log.transaction import WriteTransaction, encode_payload
from ledger.log.wal_checkpoints import WalCheckpoints
from ledger.log.writer import (
    AsyncEngineRunner,
    BatchRunner,
    Command,
    SQLiteRunner,
    Writer,
    WriterMetrics,
)
from ledger.log.writer_lock import WriterLock

T = TypeVar("T")


class LedgerStore:
    def __init__(
        self,
        url: str,
        catalogue: Catalogue,
        projectors: Sequence[Projector],
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout_ms: int = 30_000,
        max_batch: int = 512,
        max_batch_bytes: int = 8 * 1024 * 1024,
        metrics: WriterMetrics | None = None,
        read_pool_size: int = 5,
        read_only: bool = False,
        wal_checkpoints: bool = True,
    ) -> None:
        """``wal_checkpoints`` (SQLite): whether this store's writer copies the WAL back into
        the file after its batches; a server with a projector process beside it leaves that to
        the projector's writer, so that no append waits for a copy (wal_checkpoints.py)."""
        self.url = url
        # A store opened to serve reads only (``ledger serve --read-only``): no writer runs.
        self.read_only = read_only
        self.catalogue = catalogue
        views = [p.name for p in projectors if p.follows_log]
        if views:
            raise ValueError(
                f"views follow the log, not the append: {', '.join(views)} "
                "(give them to a ProjectionFollower)"
            )
        self.projectors = list(projectors)
        self.is_sqlite = is_sqlite_url(url)
        runner: BatchRunner
        if self.is_sqlite:
            runner = SQLiteRunner(
                create_sqlite_writer_engine(
                    url, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms
                ),
                WriterLock(sqlite_path(url)),
                checkpoints=WalCheckpoints() if wal_checkpoints else None,
            )
        else:
            runner = AsyncEngineRunner(create_async_db_engine(url, pool_size=1))
        self.writer = Writer(
            runner,
            catalogue,
            self.projectors,
            advisory_lock=not self.is_sqlite,
            max_batch=max_batch,
            max_batch_bytes=max_batch_bytes,
            metrics=metrics,
        )
        self.read_engine: AsyncEngine = create_async_db_engine(
            url,
            synchronous=synchronous,
            busy_timeout_ms=busy_timeout_ms,
            read_only=True,
            pool_size=read_pool_size,
        )
        self._sync_reader = (
            SyncReader(
                create_sqlite_reader_engine(
                    url,
                    synchronous=synchronous,
                    busy_timeout_ms=busy_timeout_ms,
                    pool_size=read_pool_size,
                ),
                threads=read_pool_size,
            )
            if self.is_sqlite
            else None
        )

    async def open(self) -> None:
        if not self.read_only:
            await self.writer.start()

    async def close(self) -> None:
        await self.writer.stop()
        await self.read_engine.dispose()
        if self._sync_reader is not None:
            await self._sync_reader.close()

    async def execute(self, command: Command[T], *, size_hint: int = 0) -> T:
        if self.read_only:
            raise StorageUnavailable(
                "this ledger serves reads only (ledger serve --read-only): writes are refused"
            )
        return await self.writer.execute(command, size_hint=size_hint)

    async def append(self, event: NewEvent) -> Appended:
        # Validated and encoded here, off the writer's thread: that needs no ledger state.
        encoded = event.payload
        if not isinstance(encoded, EncodedPayload):
            encoded = encode_payload(self.catalogue, event.kind, encoded)

        def command(tx: WriteTransaction) -> Appended:
            return tx.append(
                event.kind,
                encoded,
                rollout_id=event.rollout_id,
                idempotency_key=event.idempotency_key,
            )

        return await self.execute(command, size_hint=encoded.size)

    async def read_sync(self, fn: Callable[[Connection], T]) -> T:
        """Run a synchronous read in one snapshot: on SQLite whole on a reader thread
        (sync_reader.py), on PostgreSQL through the async engine."""
        if self._sync_reader is not None:
            return await self._sync_reader.run(fn)
        async with self.read() as conn:
            return await conn.run_sync(fn)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read-only connection inside one transaction: a consistent snapshot."""
        async with self.read_engine.connect() as conn, conn.begin():
            yield conn

    async def events(
        self, *, after: int = 0, limit: int = 100, rollout_id: str | None = None
    ) -> list[StoredEvent]:
        async with self.read() as conn:
            return await queries.read_events(
                conn, self.catalogue, after=after, limit=limit, rollout_id=rollout_id
            )

    async def rollout(self, rollout_id: str) -> RolloutState | None:
        async with self.read() as conn:
            return await queries.get_rollout(conn, rollout_id)

    async def head_seq(self) -> int:
        async with self.read() as conn:
            return await queries.head_seq(conn)
