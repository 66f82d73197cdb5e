"""The views following the log: catch-up from empty views, and a sustained load until caught up.

Catch-up: a SQLite database holding N captures (write side only: the views have applied
nothing), then the projection follower (log/projection_follower.py) brings the views to the
head, in pages as the projector process does. Baseline, same run, same database: the replay
``ledger verify`` runs into a scratch file (every projection, the write side's too, then the
comparison; no checkpoint, no write lock, no fsync).

Sustained: a real ``ledger serve`` (its projector process beside it, as in production), 8
clients sending batches of 100 captures, timed from the first POST until every follower of the
log has applied every event: the views (``/readyz``), the JSONL mirror (its checkpoint) and the
health checks (no record newer than its findings row), the last two read from the database; the
views' lag (events behind) is sampled every 50 ms meanwhile. Baseline, same run: Gym's
per-rollout JSONL append (flock + write + fsync per capture, 32 threads) of the same number of
captures, which has no views to wait for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from benchmarks.bench_captures import (
    BATCH,
    BATCH_CLIENTS,
    CLIENTS,
    _bulk_command,
    exchange,
    measure_baseline,
)
from benchmarks.rawhttp import RawConnection
from ledger.app.areas import (
    default_catalogue,
    default_projectors,
    views_follower,
    write_side_projectors,
)
from ledger.areas.health.findings_store import verdict_counts
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.verify import verify_projections
from ledger.mirror.checkpoint import read_lag
from tests.support.server import ServerProcess

DESCRIPTION = "views following the log: catch-up events/s vs verify's replay; sustained load"


async def _write_side_only(url: str, captures: int) -> None:
    await migrate.upgrade(url)
    store = LedgerStore(url, default_catalogue(), write_side_projectors(), synchronous="NORMAL")
    await store.open()
    try:
        for start in range(0, captures, 1000):
            items = [
                (f"r-{(start + i) // 50}", exchange(uuid.uuid4().hex, padding=400))
                for i in range(min(1000, captures - start))
            ]
            await store.execute(_bulk_command(items))
    finally:
        await store.close()


async def catch_up_views(url: str) -> tuple[int, float]:
    """The views followed from where they are to the head, in process: events, seconds."""
    store = LedgerStore(url, default_catalogue(), [])
    await store.open()
    try:
        started = time.perf_counter()
        applied = await views_follower(store).catch_up()
        return applied, time.perf_counter() - started
    finally:
        await store.close()


async def _replay(url: str) -> tuple[int, float]:
    store = LedgerStore(url, default_catalogue(), [])
    try:
        started = time.perf_counter()
        async with store.read() as conn:
            report = await verify_projections(conn, default_catalogue(), default_projectors())
        return report.events, time.perf_counter() - started
    finally:
        await store.close()


def measure_catch_up(captures: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-projector-") as scratch:
        url = f"sqlite+aiosqlite:///{Path(scratch) / 'ledger.db'}"
        asyncio.run(_write_side_only(url, captures))
        applied, seconds = asyncio.run(catch_up_views(url))
        replayed, replay_seconds = asyncio.run(_replay(url))
    print(
        f"catch-up from empty views, {applied:,} events: {applied / seconds:,.0f} events/s "
        f"({seconds:.1f} s; target >= 10,000, goal 20,000)"
    )
    rate, replay_rate = applied / seconds, replayed / replay_seconds
    print(
        f"  baseline, same database: verify's replay of every projection into a scratch file "
        f"{replay_rate:,.0f} events/s (catch-up {rate / replay_rate:.2f}x of it)"
    )


async def _views(http: httpx.AsyncClient) -> dict[str, int]:
    views: dict[str, int] = (await http.get("/readyz")).json()["views"]
    return views


async def _sustained(
    port: int, url: str, bodies: list[list[bytes]]
) -> tuple[float, float, float, list[int]]:
    lags: list[int] = []
    done = asyncio.Event()

    async def sample() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            while not done.is_set():
                lags.append((await _views(http))["behind"])
                await asyncio.sleep(0.05)

    async def client(n: int) -> None:
        async with RawConnection("127.0.0.1", port) as conn:
            for body in bodies[n]:
                status, reply = await conn.request("POST", "/v1/model-calls/batch", body)
                assert status == 200, reply

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(len(bodies))))
    acked = time.perf_counter() - started
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        while True:
            if not (await _views(http))["behind"]:
                break
            await asyncio.sleep(0.01)
    views_caught_up = time.perf_counter() - started
    done.set()
    await sampler
    await _followers_caught_up(url)
    caught_up = time.perf_counter() - started
    return acked, views_caught_up, caught_up, lags


async def _followers_caught_up(url: str) -> None:
    """Until the mirror and the health checks have applied every event (whichever process runs
    them), polled in the database."""
    store = LedgerStore(url, default_catalogue(), [], read_pool_size=1)
    await store.open()
    try:
        while True:
            async with store.read() as conn:
                mirror = await read_lag(conn)
                health = await verdict_counts(conn)
            if mirror.checkpoint >= mirror.head and health.behind == 0:
                return
            await asyncio.sleep(0.01)
    finally:
        await store.close()


def measure_sustained(captures: int) -> None:
    per_client = captures // (BATCH_CLIENTS * BATCH)
    bodies = [
        [
            json.dumps(
                {
                    "items": [
                        {"rollout_id": f"s-{n}-{b % 8}", "exchange": exchange(uuid.uuid4().hex)}
                        for _ in range(BATCH)
                    ]
                }
            ).encode()
            for b in range(per_client)
        ]
        for n in range(BATCH_CLIENTS)
    ]
    total = per_client * BATCH_CLIENTS * BATCH
    baseline = measure_baseline(total // CLIENTS)
    with tempfile.TemporaryDirectory(prefix="bench-projector-") as scratch:
        root = Path(scratch)
        (root / "data").mkdir()
        url = f"sqlite+aiosqlite:///{root / 'ledger.db'}"
        asyncio.run(migrate.upgrade(url))
        server = ServerProcess(data_dir=root / "data", database_url=url).start()
        try:
            acked, views_caught_up, caught_up, lags = asyncio.run(
                _sustained(server.port, url, bodies)
            )
        finally:
            server.stop()
    lags.sort()
    p50 = statistics.median(lags) if lags else 0
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else 0
    print(
        f"sustained, {total:,} captures in batches of {BATCH} ({BATCH_CLIENTS} clients), "
        f"projector process beside the server:"
    )
    print(
        f"  acknowledged: {total / acked:,.0f}/s; until the views caught up "
        f"{total / views_caught_up:,.0f}/s; until every follower (views, mirror, health) "
        f"caught up: {total / caught_up:,.0f}/s (target >= 1x Gym, goal 2x)"
    )
    print(f"  baseline, same run: Gym-style JSONL {baseline:,.0f}/s")
    print(
        f"  ratio to Gym: acknowledged {total / acked / baseline:.2f}x, "
        f"caught up {total / caught_up / baseline:.2f}x"
    )
    print(f"  projector lag while loading: p50 {p50:,.0f} events, p99 {p99:,.0f} events")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench projector")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = parser.parse_args(argv)
    measure_catch_up(20_000 if args.quick else 200_000)
    measure_sustained(20_000 if args.quick else 200_000)
