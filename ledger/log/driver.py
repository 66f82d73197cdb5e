"""Statements of the append hot path, run on the driver's cursor.

``Connection.execute`` costs more in SQLAlchemy's own machinery (execution context, events,
result set-up) than a small INSERT takes in SQLite (docs/benchmarks.md). The writer runs a few
statements per event, so that overhead decided the append rate. A ``DriverStatement`` is a Core
statement compiled once per dialect and parameter set, then executed on the DBAPI cursor with
the same bind processors SQLAlchemy would apply, so the stored values are identical to the
Core path. A ``DriverQuery`` does the same for the small keyed SELECTs of the hot path, with the
columns' result processors, and for a few big reads (the health summary's rows); every other
read stays on Core.

Statements run this way bypass SQLAlchemy's cursor events (and its echo logging).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.selectable import Select, TextualSelect


@dataclass(frozen=True)
class _Compiled:
    sql: str
    positional: bool
    # (parameter name, bind processor or None), in the order the driver wants them.
    binds: tuple[tuple[str, Callable[[Any], Any] | None], ...]


def _bind_plan(
    compiled: Any, dialect: Dialect
) -> tuple[tuple[str, Callable[[Any], Any] | None], ...]:
    """(parameter name, bind processor or None), in the order the driver wants them."""
    names = tuple(compiled.positiontup or ()) if compiled.positional else tuple(compiled.binds)
    return tuple(
        (name, compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect))
        for name in names
    )


def _run(
    conn: Connection,
    sql: str,
    positional: bool,
    binds: tuple[tuple[str, Callable[[Any], Any] | None], ...],
    params: Mapping[str, Any],
    *,
    fetch: bool,
) -> tuple[int, list[Any]]:
    """Execute on the DBAPI cursor; return (rowcount, rows if ``fetch``)."""
    values = [params[name] if process is None else process(params[name]) for name, process in binds]
    bound: tuple[Any, ...] | dict[str, Any] = (
        tuple(values) if positional else dict(zip((name for name, _ in binds), values, strict=True))
    )
    dialect = conn.dialect
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, bound)
        return int(cursor.rowcount), (list(cursor.fetchall()) if fetch else [])
    except dialect.loaded_dbapi.Error as exc:
        # The same exception Core would raise, so callers translate driver errors as before.
        raise DBAPIError.instance(
            sql, bound, exc, dialect.loaded_dbapi.Error, dialect=dialect
        ) from exc
    finally:
        cursor.close()


def _run_many(conn: Connection, compiled: _Compiled, rows: Sequence[Mapping[str, Any]]) -> None:
    binds = compiled.binds
    names = tuple(name for name, _ in binds)
    bound: list[Any] = []
    for params in rows:
        values = [
            params[name] if process is None else process(params[name]) for name, process in binds
        ]
        bound.append(
            tuple(values) if compiled.positional else dict(zip(names, values, strict=True))
        )
    dialect = conn.dialect
    cursor = conn.connection.cursor()
    try:
        cursor.executemany(compiled.sql, bound)
    except dialect.loaded_dbapi.Error as exc:
        raise DBAPIError.instance(
            compiled.sql, bound, exc, dialect.loaded_dbapi.Error, dialect=dialect
        ) from exc
    finally:
        cursor.close()


class DriverStatement:
    """An INSERT/UPDATE/DELETE whose columns come from the parameter names, as with Core."""

    def __init__(self, statement: UpdateBase) -> None:
        self._statement = statement
        self._compiled: dict[tuple[str, frozenset[str]], _Compiled] = {}

    def _compile(self, dialect: Dialect, keys: frozenset[str]) -> _Compiled:
        compiled = self._statement.compile(dialect=dialect, column_keys=sorted(keys))
        return _Compiled(compiled.string, compiled.positional, _bind_plan(compiled, dialect))

    def _compiled_for(self, dialect: Dialect, names: frozenset[str]) -> _Compiled:
        key = (dialect.name, names)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(dialect, names)
        return compiled

    def execute(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Run with ``params``; return the driver's rowcount."""
        compiled = self._compiled_for(conn.dialect, frozenset(params))
        rowcount, _ = _run(
            conn, compiled.sql, compiled.positional, compiled.binds, params, fetch=False
        )
        return rowcount

    def execute_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run once per row in one driver call (``executemany``: one statement prepared once,
        and on asyncpg one pipelined round trip). Every row must have the same keys."""
        if not rows:
            return
        compiled = self._compiled_for(conn.dialect, frozenset(rows[0]))
        _run_many(conn, compiled, rows)


@dataclass(frozen=True)
class _CompiledQuery:
    sql: str
    positional: bool
    binds: tuple[tuple[str, Callable[[Any], Any] | None], ...]
    # One per selected column: the type's result processor, or None.
    results: tuple[Callable[[Any], Any] | None, ...]
    row: type[NamedTuple]


class DriverQuery:
    """A SELECT run on the driver's cursor: rows come back as named tuples whose fields are
    the selected columns' names, values processed by their types' result processors.

    For small keyed reads that run for every event, and big reads whose Python pass is cheaper
    than Core's per-row machinery (``tuples``); expanding (``IN``) parameters are not
    supported.
    """

    def __init__(self, statement: Select[Any] | TextualSelect) -> None:
        self._statement = statement
        self._compiled: dict[str, _CompiledQuery] = {}

    def _compile(self, dialect: Dialect) -> _CompiledQuery:
        compiled = self._statement.compile(dialect=dialect)
        binds = _bind_plan(compiled, dialect)
        columns = list(self._statement.selected_columns)
        results = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in columns
        )
        # Unnamed columns (expressions) get positional field names.
        row = namedtuple("row", [str(column.key) for column in columns], rename=True)  # type: ignore[misc]
        return _CompiledQuery(compiled.string, compiled.positional, binds, results, row)

    def tuples(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Any]:
        """The rows as the driver's plain tuples (no named tuple made per row), values
        processed by the columns' result processors: for reads of many rows."""
        dialect = conn.dialect
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            compiled = self._compiled[dialect.name] = self._compile(dialect)
        _, raw = _run(conn, compiled.sql, compiled.positional, compiled.binds, params, fetch=True)
        results = compiled.results
        if not any(results):
            return raw
        return [
            tuple(
                value if process is None or value is None else process(value)
                for process, value in zip(results, values, strict=True)
            )
            for values in raw
        ]

    def all(self, conn: Connection, params: Mapping[str, Any]) -> list[Any]:
        rows = self.tuples(conn, params)
        make = self._compiled[conn.dialect.name].row
        return [make(*values) for values in rows]

    def first(self, conn: Connection, params: Mapping[str, Any]) -> Any | None:
        rows = self.all(conn, params)
        return rows[0] if rows else None
