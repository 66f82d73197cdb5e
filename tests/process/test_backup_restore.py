"""``ledger backup`` while 16 clients write to a real ``ledger serve``; ``ledger restore`` into an
empty place; the restored copy verifies, rebuilds its mirror, and is a prefix of the live log."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ledger.app.cli.main import main
from ledger.log.engines import create_async_db_engine, is_sqlite_url
from ledger.log.epoch import read_epoch
from ledger.log.queries import head_seq
from tests.cli.support import query, seed
from tests.support.databases import fresh_postgres_database
from tests.support.load import LoadLedger, capture_client
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

CLIENTS = 16
BEFORE_BACKUP = 160  # acknowledged captures before the backup starts
DEADLINE = 180.0


def cli(data_dir: Path, database_url: str | None, *args: str) -> Result:
    options = ["--data-dir", str(data_dir)]
    if database_url is not None:
        options += ["--database-url", database_url]
    return CliRunner().invoke(main, [*options, *args], catch_exceptions=False)


@asynccontextmanager
async def restore_target(database_url: str, tmp_path: Path) -> AsyncIterator[str | None]:
    """Where a restore goes: an empty data directory's default SQLite file (None: the default
    URL), or a new empty PostgreSQL database."""
    if is_sqlite_url(database_url):
        yield None
        return
    async with fresh_postgres_database() as url:
        yield url


async def _head_and_epoch(url: str) -> tuple[int, str | None]:
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return await head_seq(conn), await read_epoch(conn)
    finally:
        await engine.dispose()


async def _wait_for_head_beyond(url: str, seq: int) -> int:
    deadline = time.monotonic() + DEADLINE
    while (head := (await _head_and_epoch(url))[0]) <= seq:
        assert time.monotonic() < deadline, f"the live log stayed at seq {head}"
        await asyncio.sleep(0.05)  # poll
    return head


async def test_backup_under_16_writers_restores_a_verified_prefix(
    database_url: str, tmp_path: Path
) -> None:
    live_dir = tmp_path / "live"
    live_dir.mkdir()
    dest = tmp_path / ("ledger-backup.db" if is_sqlite_url(database_url) else "ledger.dump")
    record = LoadLedger(threshold=BEFORE_BACKUP)
    stop = asyncio.Event()
    server = ServerProcess(data_dir=live_dir, database_url=database_url)
    env = {**os.environ, "LEDGER_DATA_DIR": str(live_dir), "LEDGER_DATABASE_URL": database_url}
    try:
        server.start()
        clients = [
            asyncio.create_task(
                capture_client(
                    server.base_url, name=f"c{n}", record=record, stop=stop, limit=100_000
                )
            )
            for n in range(CLIENTS)
        ]
        await asyncio.wait_for(record.reached.wait(), DEADLINE)
        acknowledged_before = len(record.acknowledged)
        backup = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "ledger", "backup", str(dest)],
            env=env,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
        assert backup.returncode == 0, backup.stderr
        print(f"\n{backup.stdout.strip()} (acknowledged before: {acknowledged_before})")
        # The writers kept going: the live log grows past what was there when it ended.
        live_head_after = await _wait_for_head_beyond(database_url, acknowledged_before)
        stop.set()
        await asyncio.gather(*clients)
    finally:
        stop.set()
        server.stop()
    assert record.errors == []
    assert len(record.acknowledged) > acknowledged_before
    assert dest.stat().st_mode & 0o777 == 0o600

    restored_dir = tmp_path / "restored"
    async with restore_target(database_url, tmp_path) as target_url:
        restored = await asyncio.to_thread(cli, restored_dir, target_url, "restore", str(dest))
        assert restored.exit_code == 0, restored.output
        assert "new epoch" in restored.stdout
        url = target_url or f"sqlite+aiosqlite:///{(restored_dir / 'ledger.db').resolve()}"
        verified = await asyncio.to_thread(cli, restored_dir, target_url, "verify")
        assert verified.exit_code == 0, verified.output
        assert "ok   projections" in verified.stdout
        rebuilt = await asyncio.to_thread(cli, restored_dir, target_url, "mirror", "rebuild")
        assert rebuilt.exit_code == 0, rebuilt.output
        mirror_ok = await asyncio.to_thread(cli, restored_dir, target_url, "mirror", "verify")
        assert mirror_ok.exit_code == 0, mirror_ok.output

        restored_head, restored_epoch = await _head_and_epoch(url)
        live_head, live_epoch = await _head_and_epoch(database_url)
        # Everything acknowledged before the backup began is in it; the live log went on.
        assert acknowledged_before <= restored_head < live_head
        assert live_head >= live_head_after
        chain = "SELECT seq, hash, payload_sha256 FROM events ORDER BY seq"
        restored_rows = await asyncio.to_thread(query, url, chain)
        live_rows = await asyncio.to_thread(query, database_url, chain)
        assert restored_rows == live_rows[:restored_head]
        assert restored_epoch is not None and live_epoch is not None
        assert restored_epoch != live_epoch
    if is_sqlite_url(database_url):
        assert (restored_dir / "ledger.db").stat().st_mode & 0o777 == 0o600
        assert restored_dir.stat().st_mode & 0o777 == 0o700


async def test_backup_and_restore_refuse_to_overwrite(database_url: str, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    await asyncio.to_thread(seed, database_url, 3)
    dest = tmp_path / "backup"
    first = await asyncio.to_thread(cli, data_dir, database_url, "backup", str(dest))
    assert first.exit_code == 0, first.output
    again = await asyncio.to_thread(cli, data_dir, database_url, "backup", str(dest))
    assert again.exit_code == 1
    assert "exists; a backup never overwrites" in again.output

    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("someone's file")
    # Into the live database itself (not empty) and into a non-empty directory: refused.
    if is_sqlite_url(database_url):
        refused = await asyncio.to_thread(cli, occupied, None, "restore", str(dest))
        assert "not an empty directory" in refused.output
    else:
        refused = await asyncio.to_thread(cli, occupied, database_url, "restore", str(dest))
        assert "restore only into an empty database" in refused.output
    assert refused.exit_code == 1
    assert (occupied / "notes.txt").read_text() == "someone's file"
    assert sorted(p.name for p in occupied.iterdir()) == ["notes.txt"]
