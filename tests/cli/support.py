"""Helpers for CLI tests: run ``ledger`` in-process (CliRunner) or as a real process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from click.testing import CliRunner, Result
from sqlalchemy import text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.cli.main import main
from ledger.log.engines import create_async_db_engine
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.log.store import LedgerStore


def invoke(database_url: str, *args: str) -> Result:
    """``ledger --database-url URL ARGS...`` in-process."""
    return CliRunner().invoke(main, ["--database-url", database_url, *args], catch_exceptions=False)


async def append_events(database_url: str, count: int, *, first: int = 0) -> None:
    """Append ``count`` events of the default catalogue (so `ledger verify` can decode them)."""
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        for index in range(first, first + count):
            kind = ROLLOUT_DELETED if index % 3 == 2 else ROLLOUT_RETIRED
            await store.append(NewEvent(kind, {"had_rows": index % 2 == 0}, f"r{index % 4}"))
    finally:
        await store.close()


def seed(database_url: str, count: int) -> None:
    asyncio.run(append_events(database_url, count))


async def _query(database_url: str, statement: str) -> list[tuple[object, ...]]:
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return [tuple(row) for row in (await conn.execute(text(statement))).all()]
    finally:
        await engine.dispose()


def query(database_url: str, statement: str) -> list[tuple[object, ...]]:
    return asyncio.run(_query(database_url, statement))


def ledger_process(
    args: Sequence[str], *, data_dir: Path, database_url: str, stdout: Path
) -> subprocess.Popen[bytes]:
    """A real ``python -m ledger ARGS`` process, output to ``stdout`` (a file, polled by tests)."""
    env = {**os.environ, "LEDGER_DATA_DIR": str(data_dir), "LEDGER_DATABASE_URL": database_url}
    with stdout.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "ledger", *args],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
