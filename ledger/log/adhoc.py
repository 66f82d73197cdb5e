"""`ledger sql`: ad-hoc read-only queries.

Read-only by construction, not by inspecting the text: SQLite opens the file with mode=ro and an
authorizer that allows only reads; PostgreSQL runs the query in a READ ONLY transaction that is
always rolled back.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import DBAPIError

from ledger.log.engines import create_async_db_engine, is_sqlite_url, sqlite_path
from ledger.log.errors import BadRequest, ReadOnlyViolation


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


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


def _run_sqlite(path: str, query: str, limit: int) -> QueryResult:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    authorizer = _ReadOnlyAuthorizer()
    try:
        conn.set_authorizer(authorizer)
        try:
            cursor = conn.execute(query)
        except sqlite3.DatabaseError as exc:
            if authorizer.refused or "readonly" in str(exc):
                raise ReadOnlyViolation(
                    f"ledger sql is read-only; the statement was refused: {exc}"
                ) from exc
            raise BadRequest(f"query failed: {exc}") from exc
        except sqlite3.Warning as exc:
            raise BadRequest(f"query failed: {exc}") from exc
        columns = [d[0] for d in cursor.description or []]
        return QueryResult(columns, cursor.fetchmany(limit))
    finally:
        conn.close()


async def _run_postgres(url: str, query: str, limit: int) -> QueryResult:
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            transaction = await conn.begin()
            try:
                await conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                result = await conn.exec_driver_sql(query)
                columns = list(result.keys()) if result.returns_rows else []
                rows = [tuple(r) for r in result.fetchmany(limit)] if result.returns_rows else []
            except DBAPIError as exc:
                message = str(exc.orig)
                if "read-only" in message or "read only" in message:
                    raise ReadOnlyViolation(
                        f"ledger sql is read-only; the statement was refused: {message}"
                    ) from exc
                raise BadRequest(f"query failed: {message}") from exc
            finally:
                await transaction.rollback()
            return QueryResult(columns, rows)
    finally:
        await engine.dispose()


async def run_readonly_query(url: str, query: str, *, limit: int = 10_000) -> QueryResult:
    if is_sqlite_url(url):
        return _run_sqlite(sqlite_path(url), query, limit)
    return await _run_postgres(url, query, limit)
