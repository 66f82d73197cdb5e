"""Exactly one holder of a role per database: the mirror writer, the active projector.

SQLite: an exclusive ``flock`` on ``<database>.mirror.lock`` next to the database file; the
kernel drops it when the holder dies, however it dies. PostgreSQL: a session-level advisory lock
held on a dedicated connection; the server drops it when that connection ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ledger.log.engines import create_async_db_engine, is_sqlite_url, sqlite_path

# Keys of the PostgreSQL advisory locks that elect the mirror writer ("LEDGERM1") and the
# active projector ("LEDGERP1").
MIRROR_LOCK_KEY = 0x4C45444745524D31
PROJECTOR_LOCK_KEY = 0x4C45444745525031


class Election(Protocol):
    async def try_acquire(self) -> bool:
        """Become the mirror writer if nobody is; True while this process holds the role."""
        ...

    async def still_held(self) -> bool: ...

    async def release(self) -> None: ...


class FileLockElection:
    def __init__(self, lock_path: Path) -> None:
        self._path = lock_path
        self._fd: int | None = None

    async def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    async def still_held(self) -> bool:
        return self._fd is not None

    async def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


class AdvisoryLockElection:
    def __init__(self, url: str, key: int) -> None:
        self._url = url
        self._key = key
        self._engine: AsyncEngine | None = None
        self._conn: AsyncConnection | None = None

    async def try_acquire(self) -> bool:
        if self._conn is not None:
            return await self.still_held()
        self._engine = create_async_db_engine(self._url, null_pool=True)
        conn = await self._engine.connect()
        try:
            got = (
                await conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key})
            ).scalar()
            await conn.commit()
        except BaseException:
            await conn.close()
            await self._dispose()
            raise
        if not got:
            await conn.close()
            await self._dispose()
            return False
        self._conn = conn
        return True

    async def still_held(self) -> bool:
        if self._conn is None:
            return False
        try:
            await self._conn.execute(text("SELECT 1"))
            await self._conn.commit()
        except Exception:
            # The session is gone, and the lock with it: another replica may hold it now.
            await self.release()
            return False
        return True

    async def release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.execute(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": self._key}
                )
                await self._conn.commit()
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None
        await self._dispose()

    async def _dispose(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None


def _election(url: str, role: str, key: int) -> Election:
    """``<database>.<role>.lock`` on SQLite, the advisory lock ``key`` on PostgreSQL."""
    if is_sqlite_url(url):
        return FileLockElection(Path(f"{sqlite_path(url)}.{role}.lock"))
    return AdvisoryLockElection(url, key)


def election_for(url: str) -> Election:
    """The mirror writer's election."""
    return _election(url, "mirror", MIRROR_LOCK_KEY)


def projector_election_for(url: str) -> Election:
    """The active projector's election (app/projector.py): one projector process follows the
    log at a time, the others stand by."""
    return _election(url, "projector", PROJECTOR_LOCK_KEY)
