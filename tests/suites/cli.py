"""The ledger's own checks, run as a user runs them at the end of every standing suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.log.store import LedgerStore
from tests.support.mirror import wait_for_mirror


def ledger_argv(database_url: str, data_dir: Path, *args: str) -> list[str]:
    """The command line of ``ledger ARGS`` on this database and data directory."""
    return [
        sys.executable,
        "-m",
        "ledger",
        "--database-url",
        database_url,
        "--data-dir",
        str(data_dir),
        *args,
    ]


def ledger_cli(database_url: str, data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ledger_argv(database_url, data_dir, *args),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


async def mirror_caught_up(database_url: str, *, within_seconds: float = 120.0) -> int:
    """Poll until the running server's mirror reached the head of the log; that seq."""
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        return await wait_for_mirror(store, within_seconds=within_seconds)
    finally:
        await store.close()


def assert_ledger_verifies(database_url: str, data_dir: Path) -> None:
    """``ledger verify`` and ``ledger mirror verify`` both exit 0."""
    verified = ledger_cli(database_url, data_dir, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    mirrored = ledger_cli(database_url, data_dir, "mirror", "verify")
    assert mirrored.returncode == 0, mirrored.stdout + mirrored.stderr
