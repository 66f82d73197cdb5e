"""Write statements of the append hot path, run on the driver's cursor.

``Connection.execute`` costs about 15 µs per call in SQLAlchemy's own machinery (execution
context, events, result set-up), more than a small INSERT takes in SQLite. The writer runs a few
statements per event, so that overhead decided the append rate. A ``DriverStatement`` is a Core
statement compiled once per dialect and parameter set, then executed on the DBAPI cursor with
the same bind processors SQLAlchemy would apply, so the stored values are identical to the
Core path. Only statements that return no rows go this way; reads stay on Core.

Statements run this way bypass SQLAlchemy's cursor events (and its echo logging).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.dml import UpdateBase


@dataclass(frozen=True)
class _Compiled:
    sql: str
    positional: bool
    # (parameter name, bind processor or None), in the order the driver wants them.
    binds: tuple[tuple[str, Callable[[Any], Any] | None], ...]


class DriverStatement:
    """An INSERT/UPDATE/DELETE whose columns come from the parameter names, as with Core."""

    def __init__(self, statement: UpdateBase) -> None:
        self._statement = statement
        self._compiled: dict[tuple[str, frozenset[str]], _Compiled] = {}

    def _compile(self, dialect: Dialect, keys: frozenset[str]) -> _Compiled:
        compiled = self._statement.compile(dialect=dialect, column_keys=sorted(keys))
        names = tuple(compiled.positiontup or ()) if compiled.positional else tuple(compiled.binds)
        binds = tuple(
            (name, compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect))
            for name in names
        )
        return _Compiled(compiled.string, compiled.positional, binds)

    def execute(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Run with ``params``; return the driver's rowcount."""
        dialect = conn.dialect
        key = (dialect.name, frozenset(params))
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(dialect, key[1])
        values = [
            params[name] if process is None else process(params[name])
            for name, process in compiled.binds
        ]
        bound: tuple[Any, ...] | dict[str, Any] = (
            tuple(values)
            if compiled.positional
            else dict(zip((name for name, _ in compiled.binds), values, strict=True))
        )
        cursor = conn.connection.cursor()
        try:
            cursor.execute(compiled.sql, bound)
            return int(cursor.rowcount)
        except dialect.loaded_dbapi.Error as exc:
            # The same exception Core would raise, so callers translate driver errors as before.
            raise DBAPIError.instance(
                compiled.sql, bound, exc, dialect.loaded_dbapi.Error, dialect=dialect
            ) from exc
        finally:
            cursor.close()
