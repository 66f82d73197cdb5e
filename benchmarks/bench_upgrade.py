"""Upgrading a database whose view is stale while 16 clients append (issue 27, "Upgrade").

The database: ``bench captures``' cached read database of ``--calls`` captures, copied, its
views followed to the head in process (timed: the projector's catch-up from empty views, one
process), then the observations view marked stale, as a release that changed its code finds
it. Then ``ledger serve --upgrade`` starts (SQLite, its projector process) and 16 clients
append single captures from the moment it answers ``/healthz`` until the views have caught up,
then while the old build's tables are dropped (the projector drops them after the swap, a step
at a time), then for ``--idle-s`` more seconds. Printed: how long until the server answered,
until the new version of the views had caught up (it then serves every read), until the old
build's tables were gone, the largest size of the WAL seen, the appends acknowledged and
failed, and the ack latencies in each phase: while the views were rebuilt, while the old build
was dropped, and of the same clients on the same server after (the same run's idle figure); and
what one reader got while the views were rebuilt: the record of a rollout written before the
upgrade, read again and again (status and latency; the live views answer it since the views are
built beside them).

The code before issue 27 step 5 rebuilt every projection under the writer's lock before it
served: run this file from a checkout of it to compare (docs/benchmarks.md does, alternated).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from sqlalchemy import text

from benchmarks.bench_captures import READ_ROLLOUT, exchange, read_database
from benchmarks.bench_projector import catch_up_views
from benchmarks.serving import wait_until_serving
from ledger.log.engines import create_async_db_engine
from tests.support.server import free_port

DESCRIPTION = "serve --upgrade with a stale view while 16 clients append: acks and catch-up"

CLIENTS = 16
# The lines of the server's log (its projector's included) the bench prints.
TOLD = ("rebuilt", "stale", "start again", "beside", "swapped in")


async def _mark_observations_stale(url: str) -> None:
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text("UPDATE projection_versions SET version = 0 WHERE projection = :p"),
                {"p": "observations"},
            )
    finally:
        await engine.dispose()


REBUILDING, DROPPING, IDLE = "while the views rebuilt", "while the old build was dropped", "idle"


class Acks:
    def __init__(self) -> None:
        # Each ack's seconds by the phase it ended in.
        self.by_phase: dict[str, list[float]] = {REBUILDING: [], DROPPING: [], IDLE: []}
        self.phase = REBUILDING
        self.failed = 0
        # The reader's answers while the views were rebuilt: (status, seconds).
        self.reads: list[tuple[int, float]] = []
        self.largest_wal = 0

    @property
    def caught_up(self) -> bool:
        return self.phase != REBUILDING


async def _reader(http: httpx.AsyncClient, acks: Acks) -> None:
    """Reads a record written before the upgrade until the views have caught up."""
    while not acks.caught_up:
        started = time.perf_counter()
        try:
            status = (await http.get(f"/v1/rollouts/{READ_ROLLOUT}/record")).status_code
        except httpx.HTTPError:
            status = 0
        if not acks.caught_up:
            acks.reads.append((status, time.perf_counter() - started))


async def _client(http: httpx.AsyncClient, n: int, acks: Acks, stop: asyncio.Event) -> None:
    k = 0
    while not stop.is_set():
        body = exchange(uuid.uuid4().hex, padding=400)
        started = time.perf_counter()
        try:
            answer = await http.post(f"/v1/rollouts/up-{n}-{k // 50}/model-calls", json=body)
            ok = answer.status_code == 201
        except httpx.HTTPError:
            ok = False
        took = time.perf_counter() - started
        if not ok:
            acks.failed += 1
        acks.by_phase[acks.phase].append(took)
        k += 1


def _retired_builds(database: Path) -> int:
    """The builds a swap retired whose tables are still there (0 where the code drops them in
    the swap: it has no ``retired`` column)."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(view_builds)")}
        if "retired" not in columns:
            return 0
        return int(conn.execute("SELECT count(*) FROM view_builds WHERE retired").fetchone()[0])


def _watch_wal(database: Path, acks: Acks) -> None:
    wal = database.with_name(database.name + "-wal")
    with contextlib.suppress(FileNotFoundError):
        acks.largest_wal = max(acks.largest_wal, wal.stat().st_size)


async def _drive(
    base_url: str, database: Path, serving_at: float, idle_s: float
) -> tuple[Acks, float, float]:
    acks = Acks()
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=CLIENTS + 1)
    async with httpx.AsyncClient(base_url=base_url, timeout=120, limits=limits) as http:
        clients = [asyncio.create_task(_client(http, n, acks, stop)) for n in range(CLIENTS)]
        clients.append(asyncio.create_task(_reader(http, acks)))
        while True:
            views = (await http.get("/readyz")).json()["views"]
            # The upgrade's rebuild (or build beside the live views) has reached the head it
            # started at, and the views keep up with the appends.
            if (
                views["rebuilding_until"] is None
                and views["projected_seq"] >= views["head_seq"] - CLIENTS
            ):
                break
            _watch_wal(database, acks)
            await asyncio.sleep(0.1)  # poll
        acks.phase = DROPPING
        caught_up_after = time.perf_counter() - serving_at
        while await asyncio.to_thread(_retired_builds, database):
            _watch_wal(database, acks)
            await asyncio.sleep(0.1)  # poll
        dropped_after = time.perf_counter() - serving_at - caught_up_after
        acks.phase = IDLE
        await asyncio.sleep(idle_s)
        _watch_wal(database, acks)
        stop.set()
        await asyncio.gather(*clients)
    return acks, caught_up_after, dropped_after


def _ms(values: list[float], q: float) -> str:
    if len(values) < 2:
        return "n/a"
    return f"{statistics.quantiles(values, n=100)[int(q) - 1] * 1000:.1f}"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench upgrade")
    parser.add_argument("--quick", action="store_true", help="20,000 captures, 3 s idle")
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--idle-s", type=float, default=10.0)
    args = parser.parse_args(argv)
    calls = 20_000 if args.quick else args.calls
    idle_s = 3.0 if args.quick else args.idle_s
    source = read_database(calls)
    with tempfile.TemporaryDirectory(prefix="bench-upgrade-") as scratch:
        root = Path(scratch)
        database = root / "ledger.db"
        shutil.copyfile(source, database)
        url = f"sqlite+aiosqlite:///{database}"
        applied, seconds = asyncio.run(catch_up_views(url))
        print(
            f"projector catch-up from empty views, in process: {applied:,} events in "
            f"{seconds:.1f} s ({applied / seconds:,.0f} events/s)"
        )
        asyncio.run(_mark_observations_stale(url))
        port = free_port()
        env = {
            **os.environ,
            "LEDGER_DATABASE_URL": url,
            "LEDGER_DATA_DIR": str(root / "data"),
        }
        log = (root / "serve.log").open("wb")
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "ledger", "serve", "--upgrade", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until_serving(process, port, timeout=3600)
            serving_after = time.perf_counter() - started
            acks, caught_up_after, dropped_after = asyncio.run(
                _drive(f"http://127.0.0.1:{port}", database, time.perf_counter(), idle_s)
            )
        finally:
            process.terminate()
            process.wait(timeout=60)
            log.close()
        told = [
            line
            for line in (root / "serve.log").read_text().splitlines()
            if any(word in line for word in TOLD)
        ]
    print("\n".join(f"  serve: {line}" for line in told))
    print(
        f"serving after {serving_after:.1f} s; the views caught up {caught_up_after:.1f} s "
        f"later; the old build's tables were dropped {dropped_after:.1f} s after that"
    )
    print(f"the WAL's largest size seen: {acks.largest_wal / 2**20:,.0f} MiB")
    total = sum(len(values) for values in acks.by_phase.values())
    print(f"appends: {total:,} acknowledged or failed, {acks.failed} failed")
    print(f"{'acks':>32} {'count':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, values in acks.by_phase.items():
        worst = f"{max(values) * 1000:.1f}" if values else "n/a"
        label = f"{name}, same run" if name == IDLE else name
        print(f"{label:>32} {len(values):>7} {_ms(values, 50):>8} {_ms(values, 99):>8} {worst:>8}")
    served = [took for status, took in acks.reads if status == 200]
    refused = len(acks.reads) - len(served)
    took = [seconds for _, seconds in acks.reads]
    longest = f"{max(took) * 1000:.1f}" if took else "n/a"
    print(
        f"reads of a record written before the upgrade, while the views rebuilt: "
        f"{len(acks.reads)} ({len(served)} answered 200, {refused} not), p50 "
        f"{_ms(took, 50)} ms, max {longest} ms"
    )
