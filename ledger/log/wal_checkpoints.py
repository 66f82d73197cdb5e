"""When a SQLite writer copies the write-ahead log back into the database file.

A checkpoint copies the pages committed to the WAL into the database file. SQLite runs one by
itself in the connection whose commit takes the WAL past 1,000 pages, inside that commit's
call; and the ledger's writers hold their inter-process lock (writer_lock.py) around the whole
batch, the commit included. Every other process's writer then waited for the copy, which is as
long as the backlog readers let through: during a build of the views beside the live ones, the
projector's commits copied it, and one such copy was the longest wait an append had
(docs/decisions.md, follow-the-log 29).

So a writer's connection does not checkpoint in its commits (``wal_autocheckpoint = 0``,
engines.py). Its runner (writer.py), when it is given checkpoints (not a server's beside a
projector process: the projector's writer copies the WAL back for both, docs/decisions.md
follow-the-log 33), runs a PASSIVE checkpoint on the same connection after a batch, once the
lock is released and the batch's callers are answered, at most every ``min_interval_s``:
before the writer's next transaction, as SQLite's own would, so that one that copied the
whole WAL still lets the next transaction start the WAL over from its beginning. PASSIVE
copies what no reader still needs without waiting for readers, and other processes' writers
go on meanwhile; one that finds another process's checkpoint running answers busy at once.
"""

from __future__ import annotations

import logging
import sqlite3
import time

from sqlalchemy import Engine

log = logging.getLogger(__name__)

# At most one checkpoint this often per writer: each copies what the commits since wrote.
MIN_INTERVAL_S = 0.1


class WalCheckpoints:
    def __init__(self, *, min_interval_s: float = MIN_INTERVAL_S) -> None:
        self._min_interval_s = min_interval_s
        self._last_at = 0.0
        # Checkpoints run, and the last one's (busy, WAL frames, frames copied).
        self.runs = 0
        self.last: tuple[int, int, int] | None = None

    def due(self) -> bool:
        return time.monotonic() - self._last_at >= self._min_interval_s

    def run(self, engine: Engine) -> None:
        """A PASSIVE checkpoint on the writer's connection (its DBAPI connection: no
        transaction is begun for it)."""
        self._last_at = time.monotonic()
        raw = engine.raw_connection()
        try:
            row = raw.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            # The writer's own statements meet a damaged or full database and say so; a
            # checkpoint only copies pages, and the next one tries again.
            log.warning("WAL checkpoint failed: %s", exc)
            return
        finally:
            raw.close()
        self.runs += 1
        self.last = (int(row[0]), int(row[1]), int(row[2]))
