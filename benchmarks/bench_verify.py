"""``ledger verify``: events/s of the hash chain check and of the projection rebuild.

A generated SQLite database (rollouts of captures written in batches, as Gym's model servers
send them, ~1 KB exchanges, each rollout with a result at the end) is verified the way the CLI
does it (pages of the log, each its own transaction). The baseline, in the same run on the same
file, is a plain read of the events table in the same pages (decoding each payload's JSON):
what any pass over the log costs before verify does its work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.bench_captures import exchange
from ledger.app.areas import default_catalogue, default_projectors
from ledger.areas.captures.service import CaptureService
from ledger.areas.observations.service import ObservationService
from ledger.log import migrate
from ledger.log.engines import create_async_db_engine
from ledger.log.store import LedgerStore
from ledger.log.verify import read_pages, verify_chain, verify_projections

DESCRIPTION = "ledger verify events/s (chain, projections) vs a plain paged read of the log"
BATCH = 100


def _result(rollout_id: str) -> dict[str, object]:
    return {"task_id": "task-" + rollout_id, "_ng_task_index": 0, "resolved": True}


async def build(url: str, rollouts: int, calls: int) -> None:
    await migrate.upgrade(url)
    store = LedgerStore(url, default_catalogue(), default_projectors(), synchronous="NORMAL")
    await store.open()
    captures, observations = CaptureService(store), ObservationService(store)
    try:
        for r in range(rollouts):
            rollout_id = f"bench-verify-{r}"
            for start in range(0, calls, BATCH):
                items = [
                    {"rollout_id": rollout_id, "exchange": exchange(uuid.uuid4().hex, padding=600)}
                    for _ in range(min(BATCH, calls - start))
                ]
                await captures.append_many(items)
            await observations.record_result(rollout_id, _result(rollout_id))
    finally:
        await store.close()


async def measure(url: str) -> dict[str, tuple[int, float]]:
    engine = create_async_db_engine(url, read_only=True, null_pool=True)
    figures: dict[str, tuple[int, float]] = {}
    try:
        started, count = time.perf_counter(), 0
        async for rows in read_pages(engine):
            for row in rows:
                if row.payload is not None:
                    json.loads(row.payload)
            count += len(rows)
        figures["plain paged read (baseline)"] = (count, time.perf_counter() - started)
        started = time.perf_counter()
        chain = await verify_chain(engine)
        assert chain.ok, chain.problem
        figures["verify: hash chain"] = (chain.events, time.perf_counter() - started)
        started = time.perf_counter()
        report = await verify_projections(
            engine, default_catalogue(), default_projectors(check_templates=True)
        )
        assert report.ok, report.differences
        figures["verify: projections"] = (report.events, time.perf_counter() - started)
    finally:
        await engine.dispose()
    return figures


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench verify")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = parser.parse_args(argv)
    # Long rollouts: verify used to rebuild a rollout's record per event (O(calls²)).
    rollouts, calls = (2, 300) if args.quick else (8, 2000)
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as scratch:
        url = f"sqlite+aiosqlite:///{Path(scratch) / 'ledger.db'}"
        started = time.perf_counter()
        asyncio.run(build(url, rollouts, calls))
        print(
            f"built {rollouts} rollouts x {calls} captures (+1 result each) "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        for name, (events, seconds) in asyncio.run(measure(url)).items():
            print(f"  {name:30} {events:>8,} events {seconds:7.2f} s {events / seconds:>10,.0f} /s")
