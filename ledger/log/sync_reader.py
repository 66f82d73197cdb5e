"""Reads on SQLite in one thread hop: a synchronous connection in a small thread pool.

Through aiosqlite every step of a read (pool checkout, ``BEGIN``, execute, fetch, rollback) is
its own hop to the driver's thread and back to the event loop, and the hops cost several times
the SQL of a keyed read (docs/benchmarks.md). A read handed to
``SyncReader.run`` runs whole on a pool thread with the stdlib driver (``BEGIN`` first, so it
sees one snapshot) and comes back once. The hottest routes read this way
(``LedgerStore.read_sync``); PostgreSQL reads go through the async engine (``run_sync``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from sqlalchemy import Connection, Engine

T = TypeVar("T")


class SyncReader:
    def __init__(self, engine: Engine, threads: int) -> None:
        self._engine = engine
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ledger-read")

    def _run_sync(self, fn: Callable[[Connection], T]) -> T:
        with self._engine.connect() as conn, conn.begin():
            return fn(conn)

    async def run(self, fn: Callable[[Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run_sync, fn)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        # Threads first: a read still running must finish before its connection is closed.
        await loop.run_in_executor(None, self._executor.shutdown, True)
        self._engine.dispose()
