"""Engines and connection settings.

SQLite: Python's sqlite3 module opens transactions lazily and never for reads, which breaks
`BEGIN IMMEDIATE` and snapshot reads. Every engine here therefore turns the driver's own
transaction handling off and emits BEGIN itself: IMMEDIATE for the writer (it takes the write
lock up front, so two processes never deadlock upgrading a read lock), plain BEGIN elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote, urlsplit

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool
from sqlalchemy.util import asbool

Synchronous = Literal["FULL", "NORMAL"]


def is_sqlite_url(url: str | URL) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_url(path: Path | str, *, driver: str = "sqlite+aiosqlite") -> str:
    """The URL of the SQLite file at ``path``, whatever characters it holds.

    A URL's path ends at its first ``?`` (the query starts there), and SQLAlchemy has no escape
    for one: ``X/data?x=1/ledger.db`` would open ``X/data``. Such a path is spelt as an SQLite
    URI instead (``file:`` and the path percent-encoded, ``?uri=true``), which the driver hands
    to SQLite to decode; every other path keeps the plain form. ``sqlite_path`` reads both."""
    text = str(path)
    if "?" not in text:
        return URL.create(driver, database=text).render_as_string(hide_password=False)
    uri = URL.create(driver, database=f"file:{quote(text)}", query={"uri": "true"})
    return uri.render_as_string(hide_password=False)


def sqlite_path(url: str | URL) -> str:
    """The file a SQLite URL opens (the reverse of ``sqlite_url``, for any SQLite URL)."""
    parsed = make_url(url)
    database = parsed.database
    if database and asbool(parsed.query.get("uri", False)) and database.startswith("file:"):
        # An SQLite URI: its path percent-decoded, without authority, query or fragment.
        database = unquote(urlsplit(database).path)
    if not database or database == ":memory:":
        raise ValueError("the ledger needs a SQLite file (WAL does not work in memory)")
    return database


def async_url(url: str | URL) -> URL:
    """The async-driver form of a URL: aiosqlite for SQLite, asyncpg for PostgreSQL."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend == "postgresql":
        return parsed.set(drivername="postgresql+asyncpg")
    raise ValueError(f"unsupported database backend {backend!r} (use sqlite or postgresql)")


PAGE_SIZE = 8192
# What a writer cuts the WAL file back to when the WAL starts over (``journal_size_limit``).
WAL_SIZE_LIMIT = 64 * 1024 * 1024


def _install_sqlite_hooks(
    sync_engine: Engine,
    *,
    begin: str,
    synchronous: Synchronous,
    busy_timeout_ms: int,
    query_only: bool,
    writer: bool = False,
) -> None:
    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if not query_only:
                # A new file's page size (no effect on a file that has pages): a capture's event
                # of ~2 KB takes a 4 KiB page of its own, as two do not fit one, where three fit
                # 8 KiB (`bench storage`). Set before WAL, which writes the file's header.
                cursor.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                # WAL lets readers run beside the one writer; it is persistent in the file.
                cursor.execute("PRAGMA journal_mode = WAL")
                # Some builds (Debian's) zero every deleted row's bytes, which writes each page a
                # tombstone frees to the WAL again: a delete of 4,096 ids removed ~80,000
                # ledger rows at twice the I/O. The rows removed are projections of events that
                # stay; redaction turns zeroing back on for its own statements (secure_delete).
                cursor.execute("PRAGMA secure_delete = OFF")
            # FULL: a commit survives power loss; NORMAL may lose the last commits, never corrupt.
            cursor.execute(f"PRAGMA synchronous = {synchronous}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if writer:
                # A commit would copy the WAL into the file while the writer lock is held: the
                # writer's runner checkpoints after the batch instead (wal_checkpoints.py).
                cursor.execute("PRAGMA wal_autocheckpoint = 0")
                # The WAL file keeps the largest size it reached (readers kept it from starting
                # over during a build of the views, say) unless it is cut back when it next
                # starts over, which the writer's transaction does.
                cursor.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            if query_only:
                cursor.execute("PRAGMA query_only = ON")
        finally:
            cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql(begin)


def _sqlite_sync_engine(
    url: str | URL,
    *,
    synchronous: Synchronous,
    busy_timeout_ms: int,
    pool_size: int,
    read_only: bool,
    writer: bool = False,
) -> Engine:
    engine = create_engine(
        make_url(url).set(drivername="sqlite+pysqlite"),
        pool_size=pool_size,
        max_overflow=0,
        connect_args={"check_same_thread": False},
    )
    _install_sqlite_hooks(
        engine,
        begin="BEGIN" if read_only else "BEGIN IMMEDIATE",
        synchronous=synchronous,
        busy_timeout_ms=busy_timeout_ms,
        query_only=read_only,
        writer=writer,
    )
    return engine


def create_sqlite_writer_engine(
    url: str | URL, *, synchronous: Synchronous, busy_timeout_ms: int
) -> Engine:
    """A synchronous pysqlite engine with exactly one connection, used from one thread. Its
    commits do not checkpoint the WAL: its runner does, after a batch (wal_checkpoints.py)."""
    return _sqlite_sync_engine(
        url,
        synchronous=synchronous,
        busy_timeout_ms=busy_timeout_ms,
        pool_size=1,
        read_only=False,
        writer=True,
    )


def create_sqlite_reader_engine(
    url: str | URL, *, synchronous: Synchronous, busy_timeout_ms: int, pool_size: int
) -> Engine:
    """A synchronous, read-only pysqlite engine for the reader threads (sync_reader.py)."""
    return _sqlite_sync_engine(
        url,
        synchronous=synchronous,
        busy_timeout_ms=busy_timeout_ms,
        pool_size=pool_size,
        read_only=True,
    )


def create_async_db_engine(
    url: str | URL,
    *,
    synchronous: Synchronous = "FULL",
    busy_timeout_ms: int = 30_000,
    read_only: bool = False,
    pool_size: int = 5,
    null_pool: bool = False,
) -> AsyncEngine:
    target = async_url(url)
    kwargs: dict[str, Any] = {}
    if null_pool:
        kwargs["poolclass"] = NullPool
    elif target.get_backend_name() == "postgresql":
        kwargs.update(pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)
    else:
        kwargs.update(pool_size=pool_size, max_overflow=0)
    engine = create_async_engine(target, **kwargs)
    if target.get_backend_name() == "sqlite":
        _install_sqlite_hooks(
            engine.sync_engine,
            begin="BEGIN",
            synchronous=synchronous,
            busy_timeout_ms=busy_timeout_ms,
            query_only=read_only,
        )
    return engine


@contextmanager
def secure_delete(conn: Connection) -> Iterator[None]:
    """SQLite zeroes the bytes the statements run inside free (``ledger compact``'s redaction:
    the payloads it removes must not stay readable in free pages); nothing on PostgreSQL,
    whose old row versions vacuum reclaims."""
    if conn.dialect.name != "sqlite":
        yield
        return
    conn.exec_driver_sql("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        conn.exec_driver_sql("PRAGMA secure_delete = OFF")
