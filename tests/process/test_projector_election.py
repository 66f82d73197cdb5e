"""One projector follows the log at a time: a second `ledger project` on the same database
stands by (the projector's election: a flock beside the SQLite file, an advisory lock on
PostgreSQL) and takes over when the active one is SIGKILLed; the views reach the head through
either."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

import pytest

from ledger.app.areas import view_projectors
from ledger.areas.captures.service import CaptureService
from ledger.log.projection_follower import read_progress
from ledger.log.store import LedgerStore
from tests.support.exchanges import chat_exchange

pytestmark = pytest.mark.slow

NAMES = [view.name for view in view_projectors()]


class Projector:
    """A projector process as `ledger serve` starts it (`python -m ledger.app.projector_child`)
    and the log lines it has written."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reading = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, database_url: str, data_dir: Path) -> Projector:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "ledger.app.projector_child",
            "--database-url",
            database_url,
            env={**os.environ, "LEDGER_DATA_DIR": str(data_dir)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.lines.append(line.decode(errors="replace"))

    async def said(self, text: str, within_s: float = 60.0) -> None:
        deadline = time.monotonic() + within_s
        while not any(text in line for line in self.lines):
            assert time.monotonic() < deadline, f"no {text!r} in {self.lines}"
            await asyncio.sleep(0.05)  # poll

    async def close(self) -> int:
        if self.process.returncode is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
        code = await asyncio.wait_for(self.process.wait(), 60)
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        return code


async def _append(store: LedgerStore, rollout_id: str, calls: int) -> None:
    service = CaptureService(store)
    for n in range(calls):
        await service.append(rollout_id, chat_exchange(model_call_id=f"{rollout_id}-{n}"))


async def _views_at_head(store: LedgerStore, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while (progress := await store.read_sync(lambda c: read_progress(c, NAMES))).behind:
        assert time.monotonic() < deadline, progress
        await asyncio.sleep(0.05)  # poll


async def test_a_second_projector_stands_by_and_takes_over(
    tmp_path: Path, database_url: str, store: LedgerStore
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    first = await Projector.start(database_url, data_dir)
    second: Projector | None = None
    try:
        await first.said("projector: active")
        second = await Projector.start(database_url, data_dir)
        await second.said("standing by")
        await _append(store, "before", 6)
        await _views_at_head(store)
        assert not any("projector: active" in line for line in second.lines)

        first.process.kill()
        await first.process.wait()
        await _append(store, "after", 6)
        await second.said("projector: active")
        await _views_at_head(store)
        assert await second.close() == 0
    finally:
        for projector in (first, second):
            if projector is not None and projector.process.returncode is None:
                projector.process.kill()
                await projector.process.wait()
