"""The ledger's commands as the OTLP tests run them: real processes on a real SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def upgraded(data_dir: Path) -> str:
    url = f"sqlite+aiosqlite:///{data_dir}/ledger.db"
    subprocess.run(
        [sys.executable, "-m", "ledger", "db", "upgrade"],
        env={**os.environ, "LEDGER_DATA_DIR": str(data_dir), "LEDGER_DATABASE_URL": url},
        check=True,
        capture_output=True,
    )
    return url


def ledger_export(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", "export", *args],
        env={**os.environ, "LEDGER_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=600,
    )
