"""One savepoint per command, in as few round trips as the driver allows.

The writer wraps every command of a batch in a savepoint so a failing command is undone alone.
SQLAlchemy's ``begin_nested()`` costs more than a small append; these statements go straight to
the driver instead. A command that succeeded is released together with the next command's
``SAVEPOINT`` (on PostgreSQL one round trip: its simple-query protocol takes several statements),
and the last one is released by the COMMIT itself. On SQLite each statement is a function call
in-process, run one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.util import await_only

from ledger.log.errors import StorageUnavailable

_NAME = "ledger_command"
_SAVEPOINT = f"SAVEPOINT {_NAME}"
_RELEASE = f"RELEASE SAVEPOINT {_NAME}"
_ROLLBACK = f"ROLLBACK TO SAVEPOINT {_NAME}"


class CommandSavepoints:
    def __init__(self, conn: Connection) -> None:
        self._cursor: Any = None
        self._run: Callable[[tuple[str, ...]], None]
        if conn.dialect.name == "postgresql" and conn.dialect.driver == "asyncpg":
            raw = conn.connection.driver_connection
            assert raw is not None

            def run_together(statements: tuple[str, ...]) -> None:
                try:
                    await_only(raw.execute("; ".join(statements)))
                except Exception as exc:
                    raise StorageUnavailable(f"database error: {exc}") from exc

            self._run = run_together
        else:
            cursor = self._cursor = conn.connection.cursor()

            def run_one_by_one(statements: tuple[str, ...]) -> None:
                for statement in statements:
                    cursor.execute(statement)

            self._run = run_one_by_one
        self._release_pending = False

    def open(self) -> None:
        """Before a command."""
        self._run((_RELEASE, _SAVEPOINT) if self._release_pending else (_SAVEPOINT,))
        self._release_pending = False

    def keep(self) -> None:
        """The command succeeded: its work stays (released with the next open, or the commit)."""
        self._release_pending = True

    def undo(self) -> None:
        """The command failed: undo everything it did."""
        self._run((_ROLLBACK, _RELEASE))

    def close(self) -> None:
        if self._cursor is not None:
            self._cursor.close()
