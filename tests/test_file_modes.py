"""The data directory, the SQLite database with its WAL/SHM files and the mirror hold every
prompt: they are created private to their owner (0700 directories, 0600 files)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ledger.app.config import Settings
from ledger.log import migrate
from tests.api.support import ledger_of, running_app
from tests.support.exchanges import chat_exchange
from tests.support.mirror import wait_for_mirror


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_ledger_files_are_created_private(tmp_path: Path) -> None:
    # A permissive umask, as on many desktops: the modes must not depend on it.
    previous = os.umask(0o002)
    try:
        data_dir = tmp_path / "nested" / "data"
        settings = Settings(data_dir=data_dir)
        await migrate.upgrade(settings.resolved_database_url)
        async with running_app(settings) as (app, client):
            reply = await client.post("/v1/rollouts/r1/model-calls", json=chat_exchange())
            assert reply.status_code == 201
            await wait_for_mirror(ledger_of(app).store)
            database = data_dir / "ledger.db"
            wal_files = [database.with_name("ledger.db-wal"), database.with_name("ledger.db-shm")]
            for path in [database, *wal_files]:
                assert path.exists(), path
                assert mode_of(path) == 0o600, (path, oct(mode_of(path)))
            mirror_paths = list(settings.resolved_mirror_dir.rglob("*"))
            assert any(path.is_file() for path in mirror_paths)
            for path in [settings.resolved_mirror_dir, *mirror_paths]:
                expected = 0o700 if path.is_dir() else 0o600
                assert mode_of(path) == expected, (path, oct(mode_of(path)))
        assert mode_of(data_dir) == 0o700
        assert mode_of(data_dir.parent) == 0o700
        assert mode_of(data_dir / "control-token") == 0o600
    finally:
        os.umask(previous)
