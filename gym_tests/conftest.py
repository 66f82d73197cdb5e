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


def pytest_configure(config: pytest.Config) -> None:
    """The `ledger serve` processes of this leg keep their views with a follower in-server: the
    leg is about Gym's side of the wire; the projector process has suites of its own
    (tests/process/test_projector_process.py, the crash soak, the fence race)."""
    os.environ.setdefault("LEDGER_PROJECTOR", "in-server")


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
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A ledger database URL on each backend: SQLite in the test's ledger-data dir, or a
    PostgreSQL database of its own, dropped afterwards."""
    if request.param == "postgres":
        admin = require_postgres()
        name, url = create_postgres_database(admin)
        try:
            yield url
        finally:
            drop_postgres_database(admin, name)
    else:
        yield f"sqlite+aiosqlite:///{tmp_path / 'ledger-data' / 'ledger.db'}"


@pytest.fixture
def ledger_server(tmp_path: Path, database_url: str) -> Iterator[ServerProcess]:
    server = ledger_serve_process(data_dir=tmp_path / "ledger-data", database_url=database_url)
    try:
        yield server.start()
    finally:
        server.stop()


def pytest_report_header() -> str:
    return f"Gym leg: nemo-gym peer, ledger from {os.environ.get('LEDGER_PROJECT_PYTHON')}"
