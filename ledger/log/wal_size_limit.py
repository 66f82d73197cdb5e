"""How far a SQLite writer cuts the WAL file back when the WAL starts over.

A WAL file keeps the largest size it reached: readers that always hold a snapshot (a build of
the views beside the live ones under appends, say) keep it from starting over, and it grows by
every commit meanwhile. SQLite cuts the file back to the writer connection's
``journal_size_limit`` inside the commit of the first transaction after it starts over, with
the writer lock held, and the file system takes a while to give back the blocks of a large file
(docs/decisions.md, follow-the-log 33): every append waited for that commit.

So the writer's limit follows the file down a step at a time: before each batch it is the
file's size less ``STEP``, never below ``engines.WAL_SIZE_LIMIT``. A commit that starts the WAL
over then gives back at most ``STEP`` bytes, and the file gets back to that floor over the
next times the WAL starts over.
"""

from __future__ import annotations

import os

from sqlalchemy import Engine

from ledger.log import engines

# The most a commit that starts the WAL over cuts from the file.
STEP = 256 * 1024 * 1024


class WalSizeLimit:
    def __init__(self, wal_path: str) -> None:
        self._wal_path = wal_path
        # The file's size once it has shrunk back: the writer's connection starts with it.
        self._floor = engines.WAL_SIZE_LIMIT
        self._step = STEP
        # What the writer's connection was last told.
        self._limit = self._floor

    def apply(self, engine: Engine) -> None:
        """Set the writer connection's limit from the WAL file's size now (on the writer's
        thread, between its transactions: the engine's one connection is free)."""
        try:
            size = os.stat(self._wal_path).st_size
        except FileNotFoundError:
            size = 0
        limit = max(self._floor, size - self._step)
        if limit == self._limit:
            return
        raw = engine.raw_connection()
        try:
            raw.cursor().execute(f"PRAGMA journal_size_limit = {int(limit)}")
        finally:
            raw.close()
        self._limit = limit
