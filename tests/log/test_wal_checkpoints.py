"""A SQLite writer's commits do not checkpoint the WAL; its runner does, after each batch and
outside the writer lock (log/wal_checkpoints.py), so the WAL still starts over from its
beginning and stays small under a writer alone; when it starts over, a file that readers had
let grow is cut back, by at most a step each time (log/wal_size_limit.py)."""

from __future__ import annotations

import itertools
import math
import os
import sqlite3
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.log import engines, migrate, wal_size_limit
from ledger.log.engines import create_sqlite_writer_engine, sqlite_path
from ledger.log.events import EventType
from ledger.log.transaction import WriteTransaction
from ledger.log.wal_checkpoints import WalCheckpoints
from ledger.log.writer import SQLiteRunner, Writer
from ledger.log.writer_lock import WriterLock
from tests.support.databases import sqlite_url


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


NOTE = EventType("test.note", Note)
BATCHES = 60
NOTES_PER_BATCH = 40
NOTE_BYTES = 2000
PAYLOAD_BYTES = BATCHES * NOTES_PER_BATCH * NOTE_BYTES


async def _write(url: str, checkpoints: WalCheckpoints) -> int:
    """``PAYLOAD_BYTES`` of notes in ``BATCHES`` batches, one after another: the WAL's size."""
    return (await _write_batches(url, checkpoints))[-1]


async def _write_batches(url: str, checkpoints: WalCheckpoints) -> list[int]:
    """``_write``: the WAL's size after each batch."""
    engine = create_sqlite_writer_engine(url, synchronous="NORMAL", busy_timeout_ms=5000)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
    runner = SQLiteRunner(engine, WriterLock(sqlite_path(url)), checkpoints=checkpoints)
    wal = sqlite_path(url) + "-wal"
    writer = Writer(
        runner,
        default_catalogue([NOTE]),
        write_side_projectors(),
        advisory_lock=False,
        max_batch=512,
        max_batch_bytes=1 << 24,
    )

    def notes(batch: int) -> object:
        def command(tx: WriteTransaction) -> None:
            for n in range(NOTES_PER_BATCH):
                text = f"{batch}-{n}-".ljust(NOTE_BYTES, "x")
                tx.append("test.note", {"text": text}, rollout_id=f"r{batch}")

        return command

    await writer.start()
    sizes = []
    try:
        for batch in range(BATCHES):
            await writer.execute(notes(batch))  # type: ignore[arg-type]
            sizes.append(os.stat(wal).st_size)
        return sizes
    finally:
        await writer.stop()


async def test_the_runner_checkpoints_after_each_batch_and_the_wal_starts_over(
    tmp_path: Path,
) -> None:
    url = sqlite_url(tmp_path / "a")
    await migrate.upgrade(url)
    checkpoints = WalCheckpoints(min_interval_s=0)
    wal_bytes = await _write(url, checkpoints)
    assert checkpoints.runs >= BATCHES - 1
    # The last checkpoint copied every frame of the WAL: nothing was reading it.
    assert checkpoints.last is not None
    busy, frames, copied = checkpoints.last
    assert busy == 0 and frames == copied
    assert wal_bytes < PAYLOAD_BYTES / 10, (wal_bytes, PAYLOAD_BYTES)


async def test_with_no_checkpoint_due_the_wal_holds_every_commit(tmp_path: Path) -> None:
    """The same writes with checkpoints never due: the commits themselves copy nothing."""
    url = sqlite_url(tmp_path / "b")
    await migrate.upgrade(url)
    checkpoints = WalCheckpoints(min_interval_s=math.inf)
    wal_bytes = await _write(url, checkpoints)
    assert checkpoints.runs == 0
    assert wal_bytes > PAYLOAD_BYTES, (wal_bytes, PAYLOAD_BYTES)


async def _grow_then_write(url: str) -> tuple[int, list[int]]:
    """The WAL grown past ``PAYLOAD_BYTES`` under a reader's snapshot, then the same writes
    again with the reader gone: the grown size, and the WAL's size after each batch since."""
    # The last connection to close would checkpoint and remove the WAL: one stays open (a
    # connection opens the file at its first statement).
    idle = sqlite3.connect(sqlite_path(url), isolation_level=None)
    try:
        idle.execute("SELECT count(*) FROM events").fetchone()
        # A reader's snapshot of the file keeps every checkpoint from copying anything back.
        reader = sqlite3.connect(sqlite_path(url), isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM events").fetchone()
            grown = await _write(url, WalCheckpoints(min_interval_s=0))
        finally:
            reader.close()
        return grown, await _write_batches(url, WalCheckpoints(min_interval_s=0))
    finally:
        idle.close()


async def test_a_wal_that_readers_let_grow_is_cut_back_when_it_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engines, "WAL_SIZE_LIMIT", 256 * 1024)
    url = sqlite_url(tmp_path)
    await migrate.upgrade(url)
    grown, after = await _grow_then_write(url)
    assert grown > PAYLOAD_BYTES, grown
    # Without the reader, the first checkpoint copies the whole WAL back, and the next
    # transaction starts it over and cuts the file back to the limit.
    assert after[-1] < 1024 * 1024, (grown, after)


async def test_a_large_wal_is_cut_back_a_step_each_time_it_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit that starts the WAL over gives back at most a step of the file (the plain
    limit, in the test before, cuts it back at once), and the file still reaches the limit."""
    monkeypatch.setattr(engines, "WAL_SIZE_LIMIT", 256 * 1024)
    step = PAYLOAD_BYTES // 4
    monkeypatch.setattr(wal_size_limit, "STEP", step)
    url = sqlite_url(tmp_path)
    await migrate.upgrade(url)
    grown, after = await _grow_then_write(url)
    assert grown > PAYLOAD_BYTES, grown
    sizes = [grown, *after]
    cuts = [before - later for before, later in itertools.pairwise(sizes)]
    assert max(cuts) <= step, (step, sizes)
    # It took several times starting over, and ends at the limit.
    assert sum(cut > 0 for cut in cuts) >= 3, sizes
    assert sizes[-1] < 1024 * 1024, sizes
