"""What a run label costs on ingest, and what the summary views cost to read.

Ingest: the same batched captures (``CaptureService.append_many``) with and without ``run``
(one label read per rollout and request, one ``rollout.labelled`` event per rollout), legs
alternated, each run against the unlabelled leg run just before it. Reads: ``task_summary`` and
``run_summary`` of one run, beside ``HealthService.perf`` over the same selection (the route's
computation) and a plain scan of ``observation_records`` (the database floor), in the same run.
Files live under ``bench-data/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.service import CaptureService
from ledger.areas.health.selection import Selection
from ledger.areas.health.service import HealthService
from ledger.areas.observations.service import ObservationService
from ledger.log import migrate
from ledger.log.store import LedgerStore
from tests.support.exchanges import chat_exchange

# Usage: scripts/bench run_labels [--quick] [--rollouts=N] [--runs=N] [--database-url=URL]
DESCRIPTION = "captures/s with and without ?run=; task_summary vs perf-summary read time"


def _store(url: str) -> LedgerStore:
    return LedgerStore(url, default_catalogue(), write_side_projectors())


async def _ingest(
    store: LedgerStore, prefix: str, rollouts: int, calls: int, run: str | None
) -> float:
    """Captures per second: ``calls`` per rollout, 100 items per request, 8 requests at once."""
    captures = CaptureService(store)
    items = [
        {"rollout_id": f"{prefix}{r}", "exchange": chat_exchange(model_call_id=f"c{c}")}
        for c in range(calls)
        for r in range(rollouts)
    ]
    batches = [items[i : i + 100] for i in range(0, len(items), 100)]
    started = time.perf_counter()
    for start in range(0, len(batches), 8):
        await asyncio.gather(
            *(captures.append_many(batch, run=run) for batch in batches[start : start + 8])
        )
    return len(items) / (time.perf_counter() - started)


async def _results(store: LedgerStore, runs: int, rollouts: int) -> None:
    observations = ObservationService(store)
    for run in range(runs):
        for start in range(0, rollouts, 200):
            await asyncio.gather(
                *(
                    observations.record_result(
                        f"run{run}-{r}",
                        {
                            "task_id": f"task-{r % 50}",
                            "resolved": r % 3 == 0,
                            "latency_ms": 100 + r,
                        },
                        run=f"run-{run}",
                    )
                    for r in range(start, min(start + 200, rollouts))
                )
            )


async def _timed(repeats: int, read: Callable[[], Awaitable[Any]]) -> float:
    """Median milliseconds of ``repeats`` reads."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        await read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def bench(url: str, *, rollouts: int, runs: int, repeats: int) -> None:
    await migrate.upgrade(url)
    store = _store(url)
    await store.open()
    try:
        ratios = []
        for leg in range(3):
            plain = await _ingest(store, f"plain{leg}-", 50, 20, None)
            labelled = await _ingest(store, f"label{leg}-", 50, 20, f"leg-{leg}")
            ratios.append(labelled / plain)
            print(
                f"  ingest leg {leg}: {plain:8.0f} captures/s unlabelled, {labelled:8.0f} labelled"
            )
        print(f"  labelled / unlabelled (median of 3): {statistics.median(ratios):.2f}")

        await _results(store, runs, rollouts)
        health = HealthService(store.read_sync)
        selection = Selection(run="run-0")

        async def sql(query: str) -> list[Any]:
            async with store.read() as conn:
                return list((await conn.execute(text(query))).all())

        floor = await _timed(
            repeats, lambda: sql("SELECT COUNT(*), SUM(total_latency_ms) FROM observation_records")
        )
        tasks = await _timed(
            repeats, lambda: sql("SELECT * FROM task_summary WHERE run_label = 'run-0'")
        )
        per_run = await _timed(repeats, lambda: sql("SELECT * FROM run_summary"))
        perf = await _timed(repeats, lambda: health.perf(selection))
        total = await sql("SELECT COUNT(*) FROM observation_records")
        print(f"  {total[0][0]} records, {rollouts} in the run read")
        print(f"  scan of observation_records (floor): {floor:8.1f} ms")
        print(f"  task_summary of one run:             {tasks:8.1f} ms")
        print(f"  run_summary of every run:            {per_run:8.1f} ms")
        print(f"  perf-summary of one run (service):   {perf:8.1f} ms")
    finally:
        await store.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench run_labels")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rollouts", type=int, default=5000, help="rollouts per run")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--database-url", help="a fresh, empty PostgreSQL database to use")
    args = parser.parse_args(argv)
    rollouts = 500 if args.quick else args.rollouts
    if args.database_url:
        url = args.database_url
    else:
        directory = Path("bench-data") / "run-labels"
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        url = f"sqlite+aiosqlite:///{directory / 'ledger.db'}"
    asyncio.run(bench(url, rollouts=rollouts, runs=args.runs, repeats=5 if args.quick else 9))
