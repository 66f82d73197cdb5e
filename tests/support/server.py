"""A real ``ledger serve`` process on loopback, for crash, restart and concurrency tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tests.support.readiness import answers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServerProcess:
    """Starts ``python -m ledger serve`` with the given settings; polls /healthz until up.

    ``argv`` replaces ``ledger serve`` (the arguments after ``python -m``) with another entry
    point that takes ``--port`` and ``--log-level`` and reads the same ``LEDGER_*`` settings
    (benchmarks/ingest_server.py). ``python`` is the interpreter (default: this one; the Gym
    leg runs the project's own, from another environment).
    """

    def __init__(
        self,
        *,
        data_dir: Path,
        database_url: str,
        port: int | None = None,
        env: dict[str, str] | None = None,
        argv: Sequence[str] = ("ledger", "serve"),
        python: str | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.database_url = database_url
        self.port = port or free_port()
        self.extra_env = env or {}
        self.argv = list(argv)
        self.python = python or sys.executable
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / f"server-{self.port}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def control_token(self) -> str:
        """The token the server created in its data directory on first start."""
        return (self.data_dir / "control-token").read_text().strip()

    def start(self, timeout: float = 120.0) -> ServerProcess:
        """Start and wait until /healthz answers. The deadline is generous (it ends a wait as
        soon as the server is up): on a shared, loaded machine the imports alone of a fresh
        interpreter took longer than 30 s."""
        env = {
            **os.environ,
            "LEDGER_DATA_DIR": str(self.data_dir),
            "LEDGER_DATABASE_URL": self.database_url,
            **self.extra_env,
        }
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                self.python,
                "-m",
                *self.argv,
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        if answers(
            self.process,
            f"{self.base_url}/healthz",
            timeout=timeout,
            log_path=self.log_path,
            name="server",
        ):
            return self
        self.kill()
        raise RuntimeError(f"server did not come up in {timeout}s:\n{self.log_path.read_text()}")

    def child_pids(self) -> list[int]:
        """The live child processes of the server (``--workers N`` runs N), from /proc."""
        if self.process is None:
            return []
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except FileNotFoundError:  # the process ended while we looked
                continue
            if int(fields[1]) == self.process.pid and fields[0] != "Z":
                found.append(int(stat.parent.name))
        return found

    def wait_for_children(self, count: int, timeout: float = 60.0) -> list[int]:
        """Wait until ``count`` worker processes run (the first answers /healthz before the
        others are up); return their pids."""
        deadline = time.monotonic() + timeout
        while len(children := self.child_pids()) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server started {len(children)} of {count} workers")
            time.sleep(0.05)  # poll
        return children

    def wait_for_views(self, within_s: float = 60.0) -> None:
        """Until the views have applied every event appended so far (``/readyz``): run-level
        reads (the overview, summaries) answer from the views as they are."""
        deadline = time.monotonic() + within_s
        while True:
            with urllib.request.urlopen(f"{self.base_url}/readyz", timeout=10) as answer:
                views = json.loads(answer.read())["views"]
            if not views["behind"]:
                return
            assert time.monotonic() < deadline, f"the views stayed behind: {views}"
            time.sleep(0.02)  # poll

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers run, exactly like a crash."""
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

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
