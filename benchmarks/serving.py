"""Waiting for a benchmark's own ``ledger serve`` process to answer."""

from __future__ import annotations

import subprocess
import time

import httpx


def wait_until_serving(
    process: subprocess.Popen[bytes], port: int, *, timeout: float = 60.0
) -> subprocess.Popen[bytes]:
    """``process`` once ``/healthz`` on ``port`` answers 200; killed and an error otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # poll
    process.kill()
    raise RuntimeError(f"ledger serve on port {port} did not start in {timeout:.0f} s")
