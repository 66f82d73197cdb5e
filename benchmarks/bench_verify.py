"""``ledger verify``: events/s of the hash chain check and of the projection rebuild.

The log is the varied one of tests/support/varied_log.py, what a Gym run writes: per rollout,
captures in batches and one at a time (~1.2 KB exchanges, a few damaged), a lineage row per
call (some failure rows), an observation bundle midway and a superseding one, the result;
some rollouts also have pending calls, incomplete markers, a clear, a retire with a discarded
late row, or a delete and a second generation. 16 rollouts are written at a time, so their
events interleave. It is verified the way the CLI does it (pages of the log, each its own
transaction, through a read-only engine).

Baselines, in the same run on the same database: a plain read of the events table in the same
pages, decoding each payload's JSON (what any pass over the log costs before verify does its
work), the lean leg (benchmarks/lean_verify.py: the least code that decodes every event, rebuilds
the capture rows and each rollout's record with the same Gym functions and compares them with the
live rows; a subset of verify's work, so an upper bound for it), the floor leg
(benchmarks/verify_floor.py: a subset of the lean leg's work with no pydantic and no record, only
the capture projection's plain columns derived by hand; an upper bound for any projection check
however its Gym rules are written) and the hash chain check. The
projection rebuild is also run in the writer's order (one ``apply`` per event and projector), the
reference the page-at-a-time replay is tested against.

Usage: scripts/bench verify [--quick] [--rollouts=N] [--calls=N] [--postgres-url=URL]
(SQLite databases are cached under bench-data/; a PostgreSQL database must be empty and is
filled by the run.)
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable

from benchmarks.cached_databases import cached_database
from benchmarks.lean_verify import lean_verify
from benchmarks.verify_floor import floor_verify
from ledger.app.areas import default_catalogue, default_projectors, write_side_projectors
from ledger.log import migrate
from ledger.log.canonical import parse_json
from ledger.log.collection import fewer_collections
from ledger.log.engines import create_async_db_engine
from ledger.log.store import LedgerStore
from ledger.log.verify import read_pages, verify_chain, verify_projections
from tests.support.varied_log import LogShape, write_varied_log

DESCRIPTION = "ledger verify events/s (chain, projections) on a varied log vs a plain paged read"
CONCURRENTLY = 16
TARGET = 20_000


async def build(url: str, shape: LogShape) -> None:
    # The late rows after a retire are discarded on purpose: their warnings are expected here.
    logging.getLogger("ledger.areas.lineage.service").setLevel(logging.ERROR)
    await migrate.upgrade(url)
    store = LedgerStore(url, default_catalogue(), write_side_projectors(), synchronous="NORMAL")
    await store.open()
    try:
        await write_varied_log(store, shape, concurrently=CONCURRENTLY)
    finally:
        await store.close()


Measured = tuple[int, float, float]  # events, wall seconds, CPU seconds of this process


async def _timed(run: Callable[[], Awaitable[int]]) -> Measured:
    started, cpu = time.perf_counter(), time.process_time()
    # Every leg with the collector settings of the `ledger verify` command.
    with fewer_collections():
        events = await run()
    return events, time.perf_counter() - started, time.process_time() - cpu


async def measure(url: str) -> dict[str, Measured]:
    engine = create_async_db_engine(url, read_only=True, null_pool=True)
    figures: dict[str, Measured] = {}

    async def plain_read() -> int:
        count = 0
        async for rows in read_pages(engine):
            for row in rows:
                if row.payload is not None:
                    parse_json(row.payload)
            count += len(rows)
        return count

    async def chain() -> int:
        report = await verify_chain(engine)
        assert report.ok, report.problem
        return report.events

    def projections(*, per_event: bool) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            report = await verify_projections(
                engine,
                default_catalogue(),
                default_projectors(check_templates=True),
                per_event=per_event,
            )
            assert report.ok, report.differences
            return report.events

        return run

    async def lean() -> int:
        events, differences = await lean_verify(engine, default_catalogue())
        assert differences == 0, differences
        return events

    async def floor() -> int:
        events, differences = await floor_verify(engine)
        assert differences == 0, differences
        return events

    try:
        figures["plain paged read (baseline)"] = await _timed(plain_read)
        figures["floor: no pydantic, no record"] = await _timed(floor)
        figures["lean (the ceiling, see below)"] = await _timed(lean)
        figures["verify: hash chain"] = await _timed(chain)
        figures["verify: projections"] = await _timed(projections(per_event=False))
        figures["  (one event at a time)"] = await _timed(projections(per_event=True))
    finally:
        await engine.dispose()
    return figures


def _print(figures: dict[str, Measured]) -> None:
    print(f"  {'':30} {'events':>8} {'wall s':>8} {'events/s':>10} {'per CPU s':>10}")
    for name, (events, seconds, cpu) in figures.items():
        print(
            f"  {name:30} {events:>8,} {seconds:8.2f} {events / seconds:>10,.0f} "
            f"{events / cpu:>10,.0f}"
        )
    load = os.getloadavg()[0]
    print(
        f"  target {TARGET:,} events/s; load average {load:.2f} on {os.cpu_count()} CPUs "
        "(per CPU s: events per second of this process's CPU time)"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench verify")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--rollouts", type=int, default=96)
    parser.add_argument("--calls", type=int, default=60, help="model calls per rollout")
    parser.add_argument("--postgres-url", help="build and verify on PostgreSQL (empty database)")
    args = parser.parse_args(argv)
    shape = LogShape(8, 20) if args.quick else LogShape(args.rollouts, args.calls)
    what = f"{shape.rollouts} rollouts x {shape.calls} calls"
    if args.postgres_url:
        started = time.perf_counter()
        asyncio.run(build(args.postgres_url, shape))
        print(f"built {what} on PostgreSQL in {time.perf_counter() - started:.1f} s", flush=True)
        url = args.postgres_url
    else:
        stem = f"verify-varied-{shape.rollouts}x{shape.calls}"
        database = cached_database(stem, f"varied log ({what})", lambda u: build(u, shape))
        url = f"sqlite+aiosqlite:///{database.resolve()}"
        print(f"{what}: {database}", flush=True)
    _print(asyncio.run(measure(url)))
