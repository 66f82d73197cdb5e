"""The SQLite writers' file lock: one holder at a time, across open files (and processes)."""

from __future__ import annotations

import threading
from pathlib import Path

from ledger.log.writer_lock import WriterLock


def test_a_second_writer_waits_until_the_first_releases(tmp_path: Path) -> None:
    database = str(tmp_path / "ledger.db")
    first, second = WriterLock(database), WriterLock(database)
    order: list[str] = []
    second_waiting = threading.Event()

    def take_second() -> None:
        second_waiting.set()
        with second.held():
            order.append("second")

    try:
        with first.held():
            thread = threading.Thread(target=take_second)
            thread.start()
            assert second_waiting.wait(timeout=60)
            # The second holder is blocked in flock while the first holds the lock.
            thread.join(timeout=0.3)
            assert thread.is_alive()
            order.append("first")
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert order == ["first", "second"]
        assert Path(first.path).exists() and first.path == database + ".writer-lock"
    finally:
        first.close()
        second.close()
