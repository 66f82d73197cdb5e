"""Databases already at head, copied from one migrated template per backend and session.

Running the whole migration chain took 0.2-0.4 s per test on SQLite and about as much on
PostgreSQL, most of the suite's per-test cost. A copy is what a fresh ``upgrade`` makes, byte for
byte, except the log's epoch, which the migration draws at random: each copy gets a new one so
that no two tests' logs share an identity (as no two fresh databases would).

On PostgreSQL a copy and its drop took ~0.3 s of a quiet machine per test, and 0.6-0.9 s of a
loaded one (most of it the server writing the new database): ``PostgresCopies`` makes each
worker's next copies ahead, and drops used ones, on a thread of its own while tests run.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import TracebackType

import asyncpg

from ledger.log import migrate
from ledger.log.epoch import EPOCH, new_epoch
from ledger.log.private_files import PRIVATE_FILE_MODE, create_private_file
from tests.support.databases import (
    create_postgres_database,
    drop_postgres_database,
    postgres_url,
    run_on_own_loop,
    sqlite_url,
)

# updated_at keeps the template's time: only the identity has to differ.
_SET_EPOCH = "UPDATE log_identity SET value = {0} WHERE name = {1}"


def migrated_sqlite_template(directory: Path) -> Path:
    """Migrate a SQLite file in ``directory`` to head; returns its path, WAL checkpointed away."""
    url = sqlite_url(directory)
    run_on_own_loop(migrate.upgrade(url))
    path = directory / "ledger.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def copy_sqlite_template(template: Path, directory: Path) -> str:
    """A private copy of ``template`` as ``directory``/ledger.db, with its own epoch."""
    target = directory / "ledger.db"
    create_private_file(target)
    shutil.copyfile(template, target)
    target.chmod(PRIVATE_FILE_MODE)
    conn = sqlite3.connect(target)
    try:
        with conn:
            conn.execute(_SET_EPOCH.format("?", "?"), (new_epoch(), EPOCH))
    finally:
        conn.close()
    return sqlite_url(directory)


@contextmanager
def migrated_postgres_template() -> Iterator[str]:
    """A PostgreSQL database at head, to be copied with ``CREATE DATABASE … TEMPLATE``; dropped
    at the end. Nobody connects to it meanwhile (a template in use cannot be copied)."""

    async def create() -> str:
        name = await create_postgres_database("ledger_tmpl", template="template0")
        await migrate.upgrade(postgres_url(name))
        return name

    name = run_on_own_loop(create())
    try:
        yield name
    finally:
        run_on_own_loop(drop_postgres_database(name))


async def new_postgres_copy(template: str) -> str:
    """A new database copied from ``template``, with its own epoch; returns its name."""
    name = await create_postgres_database("ledger_t", template=template)
    try:
        conn = await asyncpg.connect(postgres_url(name, driver="postgresql"))
        try:
            await conn.execute(_SET_EPOCH.format("$1", "$2"), new_epoch(), EPOCH)
        finally:
            await conn.close()
    except BaseException:
        await drop_postgres_database(name)
        raise
    return name


class PostgresCopies:
    """Fresh copies of ``template`` (``new_postgres_copy``), ``ahead`` of them made in advance
    on threads of their own; a used copy is dropped there too. Each copy is still given to one
    test only. A failed drop is raised at ``close``. The copies are made ``ahead`` at a time:
    one alone waits mostly on the server's flush to disk (~0.3 s), several at once share it
    (8 copies took 0.03 s each made two at a time)."""

    def __init__(self, template: str, ahead: int = 3) -> None:
        self._template = template
        self._ahead = ahead
        self._thread = ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="postgres-copies")
        self._ready: deque[Future[str]] = deque()
        self._drops: list[Future[None]] = []

    @property
    def template(self) -> str:
        return self._template

    def _fill(self) -> None:
        while len(self._ready) < self._ahead:
            made = self._thread.submit(asyncio.run, new_postgres_copy(self._template))
            self._ready.append(made)

    async def take(self) -> str:
        """The name of a fresh copy (made ahead, or waited for)."""
        self._fill()
        made = self._ready.popleft()
        self._fill()
        return await asyncio.wrap_future(made)

    @asynccontextmanager
    async def url(self) -> AsyncIterator[str]:
        """The URL of a fresh copy, dropped in the background once the block ends."""
        name = await self.take()
        try:
            yield postgres_url(name)
        finally:
            self.drop(name)

    def drop(self, name: str) -> None:
        """Drop ``name`` in the background (after the copies already asked for)."""
        self._drops.append(self._thread.submit(asyncio.run, drop_postgres_database(name)))

    def close(self) -> None:
        """Drop the copies made and not taken; wait for every drop."""
        for made in self._ready:
            try:
                name = made.result()
            except Exception:  # nothing was made (a take of it would have raised)
                continue
            self.drop(name)
        self._ready.clear()
        self._thread.shutdown(wait=True)
        for dropped in self._drops:
            dropped.result()

    def __enter__(self) -> PostgresCopies:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
