"""What the Gym leg's tests share: a real ``ledger serve`` process (from the project's .venv,
not this environment) and a fresh PostgreSQL database per server.
(tests/support/server.py imports nothing but the standard library and httpx, so it runs here.)"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.support.server import ServerProcess

POSTGRES_ENV = "LEDGER_TEST_POSTGRES_URL"
PROJECT_PYTHON_ENV = "LEDGER_PROJECT_PYTHON"


def postgres_admin_url() -> str | None:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        return None
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def require_postgres() -> str:
    """The admin URL, or skip with the reason (a failure under CI, so the leg never vanishes)."""
    url = postgres_admin_url()
    reason = None
    if url is None:
        reason = f"{POSTGRES_ENV} is not set; the PostgreSQL leg needs a server"
    else:
        probe = subprocess.run(
            ["psql", url, "-qAtc", "SELECT 1"], capture_output=True, text=True, timeout=30
        )
        if probe.returncode != 0:
            reason = f"PostgreSQL at {POSTGRES_ENV} is unreachable: {probe.stderr.strip()}"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    assert url is not None
    return url


def create_postgres_database(admin_url: str) -> tuple[str, str]:
    """A new, empty database on the server; returns (name, SQLAlchemy URL for the ledger)."""
    name = f"ledger_gym_{uuid.uuid4().hex[:12]}"
    subprocess.run(
        ["psql", admin_url, "-qv", "ON_ERROR_STOP=1", "-c", f'CREATE DATABASE "{name}"'],
        check=True,
        capture_output=True,
        timeout=60,
    )
    base = admin_url.rsplit("/", 1)[0]
    return name, f"postgresql+asyncpg://{base.split('://', 1)[1]}/{name}"


def drop_postgres_database(admin_url: str, name: str) -> None:
    subprocess.run(
        ["psql", admin_url, "-qc", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'],
        capture_output=True,
        timeout=60,
    )


def ledger_serve_process(
    *,
    data_dir: Path,
    database_url: str,
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
) -> ServerProcess:
    """``ledger serve --upgrade`` run by the project's own interpreter (its .venv: the server
    stack is not installed beside Gym), on a free loopback port."""
    python = os.environ.get(PROJECT_PYTHON_ENV)
    if not python:
        raise RuntimeError(f"{PROJECT_PYTHON_ENV} is not set: run the leg by scripts/test-gym")
    data_dir.mkdir(parents=True, exist_ok=True)
    return ServerProcess(
        data_dir=data_dir,
        database_url=database_url,
        env=env,
        argv=("ledger", "serve", "--upgrade", *args),
        python=python,
    )
