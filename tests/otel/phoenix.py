"""A real Arize Phoenix server (``phoenix serve`` from .phoenix-venv, built by
scripts/phoenix-env) on a free loopback port with its own working directory, and its REST API's
spans read back."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from ledger.areas.otel.spans import Span
from ledger.areas.otel.wire import CONTENT_TYPE, encode_request
from tests.support.readiness import answers
from tests.support.server import free_port

SENTINEL = "test-sentinel"

PHOENIX_VENV = Path(__file__).resolve().parents[2] / ".phoenix-venv"


class PhoenixProcess:
    def __init__(self, working_dir: Path) -> None:
        self.working_dir = working_dir
        self.port = free_port()
        self.grpc_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = working_dir / "phoenix.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> PhoenixProcess:
        """Start (again, on the same port and data) and wait until /healthz answers."""
        self.working_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": str(self.working_dir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            # No calls home from the test machine.
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [str(PHOENIX_VENV / "bin" / "phoenix"), "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.working_dir,
        )
        log.close()
        if answers(
            self.process,
            f"{self.base_url}/healthz",
            timeout=timeout,
            log_path=self.log_path,
            name="phoenix",
            interval=0.2,
        ):
            return self
        self.stop()
        raise RuntimeError(f"phoenix did not come up:\n{self.log_path.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None

    def settled_spans(self, timeout: float = 120.0) -> list[dict[str, Any]]:
        """Every span once Phoenix has stored all it was sent before this call: a sentinel
        span (a trace of its own) is sent after them and waited for, as Phoenix stores what
        it receives in order, in the background. The sentinels are left out."""
        name = f"{SENTINEL} {secrets.token_hex(4)}"
        sentinel = Span(
            trace_id=secrets.token_bytes(16),
            span_id=secrets.token_bytes(8),
            parent_span_id=None,
            name=name,
            kind="internal",
            start_ns=time.time_ns(),
            end_ns=time.time_ns(),
            attributes={},
        )
        httpx.post(
            f"{self.base_url}/v1/traces",
            content=encode_request([sentinel]),
            headers={"Content-Type": CONTENT_TYPE},
            timeout=60,
        ).raise_for_status()
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if any(span["name"] == name for span in spans):
                return [span for span in spans if not span["name"].startswith(SENTINEL)]
            if time.monotonic() > deadline:
                raise AssertionError("Phoenix did not store the sentinel span")
            time.sleep(0.5)  # poll

    def spans(self, project: str = "default") -> list[dict[str, Any]]:
        """Every span of the project, through Phoenix's REST API (paged by its cursor)."""
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 1000}
            if cursor is not None:
                params["cursor"] = cursor
            response = httpx.get(
                f"{self.base_url}/v1/projects/{project}/spans", params=params, timeout=60
            )
            if response.status_code == 404:  # no span yet: the project is not there
                return found
            response.raise_for_status()
            body = response.json()
            found.extend(body["data"])
            cursor = body.get("next_cursor")
            if not cursor:
                return found
