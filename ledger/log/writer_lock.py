"""An inter-process lock that orders the SQLite writers of one database file.

Several ledger processes may write one SQLite file (``ledger serve --workers``, or separate
servers). SQLite alone serialises them with ``BEGIN IMMEDIATE`` and a busy handler that
*sleeps* (1, 2, 5, 10... ms) until the lock is free, so a waiting writer idles long after the
other committed. Taking this ``flock`` first makes a waiting writer sleep in the kernel and wake
as soon as the other releases it. SQLite's own locking still guarantees correctness; this only
shortens the hand-over. The lock file ``<database>.writer-lock`` is never removed (removing a
locked file would let two writers each hold "the" lock).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager


class WriterLock:
    """Exclusive ``flock`` on ``<database>.writer-lock``; opened on first use, one per writer."""

    def __init__(self, database_path: str) -> None:
        self.path = database_path + ".writer-lock"
        self._fd: int | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
