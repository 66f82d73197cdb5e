"""Waiting for a process the tests started to answer over loopback."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def answers(
    process: subprocess.Popen[bytes],
    url: str,
    *,
    timeout: float,
    log_path: Path,
    name: str,
    interval: float = 0.05,
) -> bool:
    """True once ``url`` answers 200, False when ``timeout`` passes first (the caller stops the
    process and says so); ``RuntimeError`` with the tail of its log if the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited early:\n{log_path.read_text()[-4000:]}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(interval)  # poll
    return False
