"""Fixtures of the Gym leg: a real ledger server on each backend, Gym importable on 3.11."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gym_tests.py311_shim import allow_gym_protocol_checks
from gym_tests.support import (
    create_postgres_database,
    drop_postgres_database,
    ledger_serve_process,
    require_postgres,
)
from tests.support.server import ServerProcess


@pytest.fixture(scope="session", autouse=True)
def gym_on_this_python() -> None:
    allow_gym_protocol_checks()


@pytest.fixture(autouse=True)
def in_tmp_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Gym's clients set up its Hydra config on first use: Hydra parses sys.argv (here pytest's
    # own arguments) and writes ./outputs/<date>/ in the working directory.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["gym-leg"])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    data_dir = tmp_path / "ledger-data"
    dropped: tuple[str, str] | None = None
    if request.param == "postgres":
        admin = require_postgres()
        name, url = create_postgres_database(admin)
        dropped = (admin, name)
    else:
        url = f"sqlite+aiosqlite:///{data_dir / 'ledger.db'}"
    server = ledger_serve_process(data_dir=data_dir, database_url=url)
    try:
        yield server.start()
    finally:
        server.stop()
        if dropped is not None:
            drop_postgres_database(*dropped)


def pytest_report_header() -> str:
    return f"Gym leg: nemo-gym peer, ledger from {os.environ.get('LEDGER_PROJECT_PYTHON')}"
