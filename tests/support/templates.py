"""Databases already at head, copied from one migrated template per backend and session.

Running the whole migration chain took 0.2-0.4 s per test on SQLite and about as much on
PostgreSQL, most of the suite's per-test cost. A copy is what a fresh ``upgrade`` makes, byte for
byte, except the log's epoch, which the migration draws at random: each copy gets a new one so
that no two tests' logs share an identity (as no two fresh databases would).
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

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


@asynccontextmanager
async def postgres_copy(template: str) -> AsyncIterator[str]:
    """A new database copied from ``template``, with its own epoch; yields its asyncpg URL."""
    name = await create_postgres_database("ledger_t", template=template)
    try:
        conn = await asyncpg.connect(postgres_url(name, driver="postgresql"))
        try:
            await conn.execute(_SET_EPOCH.format("$1", "$2"), new_epoch(), EPOCH)
        finally:
            await conn.close()
        yield postgres_url(name)
    finally:
        await drop_postgres_database(name)
