"""What the Gym leg's tests share: a real ``ledger serve`` process (from the project's .venv,
not this environment), a fresh PostgreSQL database per server, and Gym's Python 3.11 shim."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import typing
import uuid
from pathlib import Path

import httpx
import pytest

POSTGRES_ENV = "LEDGER_TEST_POSTGRES_URL"
PROJECT_PYTHON_ENV = "LEDGER_PROJECT_PYTHON"


def allow_gym_protocol_checks() -> None:
    """Gym 0.7.0's plug-in loader reads ``Protocol.__protocol_attrs__``, which typing sets only
    from Python 3.12 on; on 3.11 the loader raises AttributeError before it looks at the store.
    Computing the attribute the way 3.12 does (and keeping it out of the runtime isinstance
    check) lets Gym's own loader run unchanged. See docs/contract.md, "Gym 0.7.0 on 3.11"."""
    if sys.version_info >= (3, 12):
        return
    from nemo_gym.token_id_capture import protocols

    excluded: list[str] = typing.EXCLUDED_ATTRIBUTES  # type: ignore[attr-defined]
    if "__protocol_attrs__" not in excluded:
        excluded.append("__protocol_attrs__")
    for protocol in (
        protocols.LineageResolver,
        protocols.CaptureLedger,
        protocols.TokenSink,
        protocols.TokenSource,
    ):
        protocol.__protocol_attrs__ = typing._get_protocol_attrs(protocol)  # type: ignore[attr-defined]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


class LedgerServer:
    """``ledger serve --upgrade`` from the project's environment, on a free loopback port."""

    def __init__(
        self,
        *,
        data_dir: Path,
        database_url: str,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ):
        python = os.environ.get(PROJECT_PYTHON_ENV)
        if not python:
            raise RuntimeError(
                f"{PROJECT_PYTHON_ENV} is not set: run the leg with scripts/test-gym"
            )
        self.python = python
        self.data_dir = data_dir
        self.database_url = database_url
        self.port = free_port()
        self.extra_env = env or {}
        self.extra_args = args or []
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / f"server-{self.port}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def control_token(self) -> str:
        return (self.data_dir / "control-token").read_text().strip()

    def start(self, timeout: float = 60.0) -> LedgerServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # The project's interpreter must not see this environment's packages.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(
            LEDGER_DATA_DIR=str(self.data_dir),
            LEDGER_DATABASE_URL=self.database_url,
            **self.extra_env,
        )
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    self.python,
                    "-m",
                    "ledger",
                    "serve",
                    "--upgrade",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "warning",
                    *self.extra_args,
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ledger serve exited early:\n{self.log_path.read_text()}")
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # poll
        self.kill()
        raise RuntimeError(
            f"ledger serve did not come up in {timeout}s:\n{self.log_path.read_text()}"
        )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
