"""`ledger sql`: ad-hoc read-only queries.

Read-only by construction, not by inspecting the text: SQLite opens the file with mode=ro and an
authorizer that allows only reads; PostgreSQL runs the query in a READ ONLY transaction that is
always rolled back.

Bounded: a query runs at most ``timeout_s`` seconds (SQLite: a progress handler interrupts it;
PostgreSQL: ``statement_timeout``), because a query left running pins a read snapshot (the WAL,
or PostgreSQL's dead rows, grow behind it while the server writes); and at most ``limit`` rows
are fetched (the result says whether more were there).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncpg
from sqlalchemy.engine import make_url

from ledger.log.engines import is_sqlite_url, sqlite_path
from ledger.log.errors import BadRequest, LedgerError, QueryTimeout, ReadOnlyViolation


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    # More rows were there than the limit allowed.
    truncated: bool = False


# SQLite calls the progress handler every this many virtual machine instructions.
_PROGRESS_STEPS = 1000


def sqlite_read_only_uri(path: str) -> str:
    """A file: URI opening ``path`` read-only, whatever characters it holds: unquoted, a ``#``
    or ``?`` in a directory name would end the path (``we#ird`` opened ``we``, read-write)."""
    return f"file:{quote(str(Path(path).resolve()))}?mode=ro"


def _timed_out(timeout_s: float) -> QueryTimeout:
    return QueryTimeout(
        f"query cancelled: it ran longer than the {timeout_s:g} s statement timeout "
        "(--timeout, LEDGER_SQL_TIMEOUT_S)"
    )


def _bounded(rows: list[tuple[Any, ...]], limit: int) -> tuple[list[tuple[Any, ...]], bool]:
    return rows[:limit], len(rows) > limit


_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
# Pragmas that only report; any pragma given an argument is refused below.
_READ_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "foreign_key_list"}


class _ReadOnlyAuthorizer:
    """Allows reads only, and remembers whether it refused anything.

    SQLite reports a refusal as "not authorized" or "authorization denied" depending on the
    statement; the flag, not the wording, decides that the query tried to write.
    """

    def __init__(self) -> None:
        self.refused = False

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None
    ) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and arg1 in _READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        self.refused = True
        return sqlite3.SQLITE_DENY


def _run_sqlite(path: str, query: str, limit: int, timeout_s: float) -> QueryResult:
    conn = sqlite3.connect(sqlite_read_only_uri(path), uri=True)
    authorizer = _ReadOnlyAuthorizer()
    deadline = time.monotonic() + timeout_s
    try:
        conn.set_authorizer(authorizer)
        # Non-zero interrupts the statement (while it runs and while rows are fetched).
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)
        try:
            cursor = conn.execute(query)
            columns = [d[0] for d in cursor.description or []]
            rows, truncated = _bounded(cursor.fetchmany(limit + 1), limit)
        except sqlite3.OperationalError as exc:
            if time.monotonic() > deadline and "interrupted" in str(exc):
                raise _timed_out(timeout_s) from exc
            raise _failed(authorizer, exc) from exc
        except sqlite3.DatabaseError as exc:
            raise _failed(authorizer, exc) from exc
        except sqlite3.Warning as exc:
            raise BadRequest(f"query failed: {exc}") from exc
        return QueryResult(columns, rows, truncated)
    finally:
        conn.close()


def _failed(authorizer: _ReadOnlyAuthorizer, exc: sqlite3.DatabaseError) -> LedgerError:
    if authorizer.refused or "readonly" in str(exc):
        return ReadOnlyViolation(f"ledger sql is read-only; the statement was refused: {exc}")
    return BadRequest(f"query failed: {exc}")


async def _run_postgres(url: str, query: str, limit: int, timeout_s: float) -> QueryResult:
    # asyncpg itself, for a cursor: at most limit + 1 rows ever leave the server. A prepared
    # statement also refuses several statements in one string, so nothing of them runs.
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        transaction = conn.transaction(readonly=True)
        await transaction.start()
        try:
            # LOCAL: it ends with the transaction (always rolled back below).
            await conn.execute(f"SET LOCAL statement_timeout = {max(1, round(timeout_s * 1000))}")
            statement = await conn.prepare(query)
            columns = [attribute.name for attribute in statement.get_attributes()]
            if columns:
                cursor = await statement.cursor()
                fetched = [tuple(r) for r in await cursor.fetch(limit + 1)]
            else:
                await statement.fetch()
                fetched = []
            rows, truncated = _bounded(fetched, limit)
        except asyncpg.QueryCanceledError as exc:
            raise _timed_out(timeout_s) from exc
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            message = str(exc)
            if isinstance(exc, asyncpg.ReadOnlySQLTransactionError) or "read-only" in message:
                raise ReadOnlyViolation(
                    f"ledger sql is read-only; the statement was refused: {message}"
                ) from exc
            raise BadRequest(f"query failed: {message}") from exc
        finally:
            await transaction.rollback()
        return QueryResult(columns, rows, truncated)
    finally:
        await conn.close()


async def run_readonly_query(
    url: str, query: str, *, limit: int = 10_000, timeout_s: float = 30.0
) -> QueryResult:
    if is_sqlite_url(url):
        return _run_sqlite(sqlite_path(url), query, limit, timeout_s)
    return await _run_postgres(url, query, limit, timeout_s)
