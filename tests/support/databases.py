"""Fresh databases for tests: a SQLite file, or a new PostgreSQL database per test.

The PostgreSQL leg runs when LEDGER_TEST_POSTGRES_URL names a reachable server. Unset or
unreachable, it is skipped with the reason shown (``-ra``); under CI (CI=true) an unreachable
server is a failure, so the leg can never silently vanish there.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from ledger.log import engines
from ledger.log.engines import create_async_db_engine

POSTGRES_ENV = "LEDGER_TEST_POSTGRES_URL"
T = TypeVar("T")


async def run_on(url: str, fn: Any) -> Any:
    """``fn(connection)`` on a fresh engine's connection to ``url``, the engine then disposed."""
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(fn)
    finally:
        await engine.dispose()


def admin_dsn_or_none() -> str | None:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        return None
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@cache
def postgres_unavailable_reason() -> str | None:
    dsn = admin_dsn_or_none()
    if dsn is None:
        return f"{POSTGRES_ENV} is not set; the PostgreSQL leg needs a server"

    async def probe() -> None:
        conn = await asyncpg.connect(dsn, timeout=30)
        await conn.close()

    try:
        run_on_own_loop(probe())
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        reason = f"PostgreSQL at {POSTGRES_ENV} is unreachable: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        return reason
    return None


def run_on_own_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to the end from inside a test's running event loop (a session fixture,
    a probe): on a thread with a loop of its own."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def require_postgres() -> None:
    reason = postgres_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


@asynccontextmanager
async def fresh_postgres_database() -> AsyncIterator[str]:
    """Create a uniquely named database, yield its asyncpg URL, drop it afterwards."""
    # template0: concurrent CREATE DATABASE from template1 fails while another session is
    # copying it ("source database is being accessed by other users").
    name = await create_postgres_database("ledger_t", template="template0")
    try:
        yield postgres_url(name)
    finally:
        await drop_postgres_database(name)


async def create_postgres_database(prefix: str, *, template: str) -> str:
    """A new database copied from ``template``, named ``prefix`` and a random suffix."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(admin_dsn())
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await admin.close()
    return name


def postgres_url(name: str, driver: str = "postgresql+asyncpg") -> str:
    """The URL of database ``name`` on the test server (asyncpg's SQLAlchemy URL by default)."""
    url = make_url(admin_dsn()).set(drivername=driver, database=name)
    return url.render_as_string(hide_password=False)


def admin_dsn() -> str:
    dsn = admin_dsn_or_none()
    assert dsn is not None, f"{POSTGRES_ENV} is not set"
    return dsn


async def drop_postgres_database(name: str) -> None:
    admin = await asyncpg.connect(admin_dsn())
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def sqlite_url(directory: Path) -> str:
    return engines.sqlite_url(directory / "ledger.db")
