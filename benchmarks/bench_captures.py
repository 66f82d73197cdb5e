"""Capture ingest over HTTP vs a Gym-style JSONL CaptureStore, and the attachment read latency.

Ingest: a real ``ledger serve`` (uvicorn) on loopback with a fresh SQLite file, realistic ~2 KB
exchanges, 32 concurrent clients sending single captures, then batches of 100. Baseline, same
run: 32 threads appending each capture to its rollout's JSONL file with flock + write + fsync,
exactly Gym's CaptureStore discipline.

Same-run baselines on the same server stack (benchmarks/bare_server.py, uvicorn + Starlette):
a bare route that parses the body with orjson, ``executemany``s its raw items into one SQLite
table and commits with ``synchronous=FULL``, and a no-op POST route. The product's figures are
printed as ratios to them and to the Gym-style baseline; batched ingest uses 8 clients (issue 9).

Diagnostics, same run, same clients and bodies (not product configurations): the server with
the capture mirror off, then also without the runs and evidence projections, then with only the
rollouts projection (benchmarks/ingest_server.py); the differences say where the time goes. The
views (observations) follow the log in the projector process in every configuration but the
last: the product with its projector process standing by ([p]: the bench holds the projector's
election), which says what following the log beside the server costs the acknowledgements.

Read: ``GET /v1/rollouts/{id}/ng_model_call_capture`` for a 50-call rollout in a database holding
1,000,000 model calls (``--quick``: 20,000); p50/p99 over sequential requests. The database is
built once through the store's own append path (big writer batches) and cached under
``bench-data/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.cached_databases import cached_database
from benchmarks.rawhttp import RawConnection
from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.events import MODEL_CALL_CAPTURED, ModelCallCaptured
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.mirror.election import projector_election_for
from tests.support.server import ServerProcess

DESCRIPTION = "capture ingest (single, batched) vs flock+fsync JSONL; ng_model_call_capture read"

CLIENTS = 32
BATCH = 100
# Batched ingest as issue 9 states its target: 8 clients, 100 captures per request.
BATCH_CLIENTS = 8
READ_ROLLOUT = "bench-read-target"


def exchange(model_call_id: str, *, padding: int = 1500) -> dict[str, Any]:
    """A realistic chat exchange of about ``padding + 500`` bytes."""
    return {
        "model_call_id": model_call_id,
        "dialect": "chat",
        "model_ref": {"type": "responses_api_models", "name": "policy_model"},
        "started_at": 1764400000.25,
        "completed_at": 1764400001.5,
        "latency_ms": 1250.5,
        "latency_ttft_ms": 80.0,
        "status_code": 200,
        "error_category": None,
        "request": {
            "model": "policy",
            "messages": [{"role": "user", "content": "x" * (padding // 2)}],
        },
        "response": {
            "id": "chatcmpl-" + model_call_id[:12],
            "object": "chat.completion",
            "model": "policy",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "y" * (padding // 2)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 80, "total_tokens": 200},
        },
    }


# ---- ingest over HTTP ---------------------------------------------------------------------

MIRROR_OFF = {"LEDGER_MIRROR_ENABLED": "false"}


@dataclass(frozen=True)
class IngestServer:
    """One server configuration measured with the same clients and bodies as the others."""

    label: str
    argv: tuple[str, ...] = ("ledger", "serve")
    env: dict[str, str] = field(default_factory=dict)
    # The bench holds the projector's election, so the server's projector process stands by:
    # nothing follows the log (views, mirror, health), the acknowledgements run alone.
    projector_stands_by: bool = False


def ingest_server(projectors: str) -> tuple[str, ...]:
    return ("benchmarks.ingest_server", "--projectors", projectors)


# Same-run baselines on the same server stack (benchmarks/bare_server.py): storing the raw
# items durably with nothing else, and the HTTP request alone.
BARE = IngestServer(
    "bare route (orjson, executemany, FULL commit)",
    argv=("benchmarks.bare_server", "--mode", "bare"),
)
NOOP = IngestServer("no-op POST route", argv=("benchmarks.bare_server", "--mode", "noop"))
# The ceiling of the same job on this stack (benchmarks/lean_ingest.py): the ledger's own
# validation, canonical bytes and chain, the events and positions, group commit; no machinery.
LEAN = IngestServer(
    "lean same-job route (ceiling, see lean_ingest.py)", argv=("benchmarks.lean_ingest",)
)
PRODUCT = IngestServer("ledger (product: ledger serve, mirror on)")
# The product on both cores: two server processes on the port, writers taking turns.
PRODUCT_WORKERS = IngestServer(
    "ledger serve --workers 2 (product, mirror on)", argv=("ledger", "serve", "--workers", "2")
)
# Diagnostics, not product configurations: each removes one more piece of the per-capture
# work, so the differences between the lines say where the time goes.
DIAGNOSTICS = (
    IngestServer("[a] ledger serve, mirror off", env=MIRROR_OFF),
    IngestServer(
        "[b] mirror off, no runs/evidence projection*",
        argv=ingest_server("rollouts,captures,lineage"),
        env=MIRROR_OFF,
    ),
    IngestServer(
        "[c] mirror off, rollouts projection only*",
        argv=ingest_server("rollouts"),
        env=MIRROR_OFF,
    ),
)
# What the projector process beside the server costs the acknowledgements (its CPU on a
# 2-core machine, its turns at the log's write lock, its pages in the log's WAL): the product
# with its projector standing by.
NO_PROJECTOR = IngestServer(
    "[p] ledger serve, nothing following the log*", projector_stands_by=True
)


@dataclass(frozen=True)
class IngestBodies:
    """Request bodies built once and sent to every server (each gets a fresh database)."""

    warmup: list[bytes]  # [client]: one exchange, sent before the clock starts
    single: list[list[bytes]]  # [client][request]: one exchange each
    batches: list[list[bytes]]  # [client][request]: BATCH items each

    @classmethod
    def build(cls, per_client: int, batches_per_client: int) -> IngestBodies:
        warmup = [json.dumps(exchange(uuid.uuid4().hex)).encode() for _ in range(CLIENTS)]
        single = [
            [json.dumps(exchange(uuid.uuid4().hex)).encode() for _ in range(per_client)]
            for _ in range(CLIENTS)
        ]
        batches = [
            [
                json.dumps(
                    {
                        "items": [
                            {
                                "rollout_id": f"batch-{n}-{b % 8}",
                                "exchange": exchange(uuid.uuid4().hex),
                            }
                            for _ in range(BATCH)
                        ]
                    }
                ).encode()
                for b in range(batches_per_client * CLIENTS // BATCH_CLIENTS)
            ]
            for n in range(BATCH_CLIENTS)
        ]
        return cls(warmup, single, batches)

    @property
    def single_captures(self) -> int:
        return sum(len(bodies) for bodies in self.single)

    @property
    def batched_captures(self) -> int:
        return sum(len(bodies) for bodies in self.batches) * BATCH


@dataclass(frozen=True)
class IngestRates:
    single: float  # captures/s
    batched: float  # captures/s


async def _warm_up(port: int, bodies: list[bytes]) -> None:
    """One capture per client before timing: a fresh server's first requests pay one-off costs
    (lazy imports, first validations, cold caches) that are not ingest throughput."""

    async def client(n: int) -> None:
        async with RawConnection("127.0.0.1", port) as http:
            status, reply = await http.request(
                "POST", f"/v1/rollouts/warm-{n}/model-calls", bodies[n]
            )
            assert status == 201, reply

    await asyncio.gather(*(client(n) for n in range(len(bodies))))


async def _single_clients(port: int, bodies: list[list[bytes]]) -> float:
    async def client(n: int) -> None:
        async with RawConnection("127.0.0.1", port) as http:
            for i, body in enumerate(bodies[n]):
                status, reply = await http.request(
                    "POST", f"/v1/rollouts/bench-{n}-{i % 8}/model-calls", body
                )
                assert status == 201, reply

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(len(bodies))))
    return time.perf_counter() - started


async def _batch_clients(port: int, bodies: list[list[bytes]]) -> float:
    async def client(n: int) -> None:
        async with RawConnection("127.0.0.1", port) as http:
            for body in bodies[n]:
                status, reply = await http.request("POST", "/v1/model-calls/batch", body)
                assert status == 200, reply
                assert all(r["status"] == 201 for r in json.loads(reply)["results"])

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(len(bodies))))
    return time.perf_counter() - started


def measure_ingest(
    config: IngestServer,
    bodies: IngestBodies,
    inspect: Callable[[ServerProcess], None] | None = None,
) -> IngestRates:
    """Captures/s of one server configuration on a fresh database; ``inspect`` sees the server
    once the clients are done, before it stops (bench otlp reads its processes' CPU)."""
    with tempfile.TemporaryDirectory(prefix="bench-captures-") as scratch:
        root = Path(scratch)
        data_dir = root / "data"
        data_dir.mkdir()
        database_url = f"sqlite+aiosqlite:///{root / 'ledger.db'}"
        asyncio.run(migrate.upgrade(database_url))
        election = projector_election_for(database_url)
        if config.projector_stands_by and not asyncio.run(election.try_acquire()):
            raise RuntimeError("the projector's election of a fresh database is taken")
        server = ServerProcess(
            data_dir=data_dir, database_url=database_url, env=config.env, argv=config.argv
        ).start()
        try:
            if "--workers" in config.argv:
                server.wait_for_children(int(config.argv[config.argv.index("--workers") + 1]))
            asyncio.run(_warm_up(server.port, bodies.warmup))
            single_seconds = asyncio.run(_single_clients(server.port, bodies.single))
            batch_seconds = asyncio.run(_batch_clients(server.port, bodies.batches))
            if inspect is not None:
                inspect(server)
        finally:
            server.stop()
            asyncio.run(election.release())
    return IngestRates(
        single=bodies.single_captures / single_seconds,
        batched=bodies.batched_captures / batch_seconds,
    )


def print_diagnostics(
    product: IngestRates, diagnostics: list[IngestRates], no_projector: IngestRates
) -> None:
    """The diagnostic lines and what the differences between them attribute per capture.

    µs/capture is wall time per capture with 32 clients (1 / throughput), not CPU time: on a
    saturated server it is what each removed piece of work cost the throughput.
    """
    print(
        "diagnostics (NOT the product configuration; same run, same clients and bodies, "
        "fresh database each):"
    )
    print(f"  {'':46} {'single':>18} {'batched x' + str(BATCH):>18}")
    lines = [(PRODUCT, product), *zip(DIAGNOSTICS, diagnostics, strict=True)]
    for config, rates in [*lines, (NO_PROJECTOR, no_projector)]:
        print(
            f"  {config.label:46} {rates.single:7,.0f}/s {1e6 / rates.single:5.0f} µs"
            f" {rates.batched:7,.0f}/s {1e6 / rates.batched:5.0f} µs"
        )
    print(
        "  * ingest only: left-out projections are not maintained, so the routes reading them"
        " (labels,\n    call evidence; for [c] also model-calls, lineage) would serve stale or"
        " missing data;\n    for [p] every view, the mirror and the health findings"
    )
    steps = [
        "capture mirror (product - [a])",
        "runs + evidence projections ([a] - [b])",
        "captures + lineage projections ([b] - [c])",
    ]
    print("  per-capture wall time attributed (differences of the lines above; noisy):")
    for step, before, after in zip(steps, lines, lines[1:], strict=False):
        single = 1e6 / before[1].single - 1e6 / after[1].single
        batched = 1e6 / before[1].batched - 1e6 / after[1].batched
        print(f"    {step:44} {single:+14.0f} µs {batched:+15.0f} µs")
    floor = lines[-1][1]
    print(
        f"    {'floor: HTTP, validation, append, commit [c]':44}"
        f" {1e6 / floor.single:14.0f} µs {1e6 / floor.batched:15.0f} µs"
    )
    single = 1e6 / product.single - 1e6 / no_projector.single
    batched = 1e6 / product.batched - 1e6 / no_projector.batched
    print(
        f"    {'the projector process beside it (product - [p])':44} {single:+14.0f} µs"
        f" {batched:+15.0f} µs"
    )


# ---- the Gym-style baseline ---------------------------------------------------------------


def gym_append(directory: Path, rollout_id: str, line: str) -> None:
    """Gym's CaptureStore append: open, exclusive flock, write, flush, fsync, unlock."""
    with (directory / f"{rollout_id}.capture.jsonl").open("a", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def measure_baseline(per_writer: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-gym-") as scratch:
        directory = Path(scratch)

        def writer(n: int) -> None:
            for i in range(per_writer):
                line = serialize_capture_line(exchange(uuid.uuid4().hex))
                gym_append(directory, f"bench-{n}-{i % 8}", line)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(CLIENTS)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
    return CLIENTS * per_writer / seconds


# ---- the read ----------------------------------------------------------------------------


def _bulk_command(rollouts: list[tuple[str, dict[str, Any]]]) -> Callable[[WriteTransaction], int]:
    def command(tx: WriteTransaction) -> int:
        for rollout_id, body in rollouts:
            tx.append(
                MODEL_CALL_CAPTURED,
                ModelCallCaptured.model_construct(
                    model_call_id=body["model_call_id"], exchange=body
                ),
                rollout_id=rollout_id,
            )
        return len(rollouts)

    return command


async def _build_read_database(database_url: str, calls: int, progress: bool) -> None:
    await migrate.upgrade(database_url)
    store = LedgerStore(
        database_url,
        default_catalogue(),
        write_side_projectors(),
        synchronous="NORMAL",
        max_batch=64,
    )
    await store.open()
    try:
        filler = calls - 50
        chunk = 2000
        done = 0
        started = time.perf_counter()
        while done < filler:
            size = min(chunk, filler - done)
            items = [
                (f"filler-{(done + i) // 50}", exchange(uuid.uuid4().hex, padding=400))
                for i in range(size)
            ]
            await store.execute(_bulk_command(items))
            done += size
            if progress and done % 100_000 < chunk:
                rate = done / (time.perf_counter() - started)
                print(f"  built {done:,} calls ({rate:,.0f}/s)", flush=True)
        target = [(READ_ROLLOUT, exchange(uuid.uuid4().hex)) for _ in range(50)]
        await store.execute(_bulk_command(target))
    finally:
        await store.close()


def read_database(calls: int) -> Path:
    return cached_database(
        f"captures-read-{calls}",
        f"read database with {calls:,} model calls",
        lambda url: _build_read_database(url, calls, calls > 100_000),
    )


async def _read_latencies(base_url: str, requests: int) -> list[float]:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        path = f"/v1/rollouts/{READ_ROLLOUT}/ng_model_call_capture"
        for _ in range(20):  # warm up connections and caches
            (await http.get(path)).raise_for_status()
        latencies = []
        for _ in range(requests):
            started = time.perf_counter()
            reply = await http.get(path)
            latencies.append((time.perf_counter() - started) * 1000)
            assert reply.status_code == 200 and len(reply.json()["calls"]) == 50
    return latencies


def measure_read(calls: int, requests: int) -> tuple[float, float]:
    cache = read_database(calls)
    with tempfile.TemporaryDirectory(prefix="bench-read-") as scratch:
        root = Path(scratch)
        database = root / "ledger.db"
        shutil.copyfile(cache, database)
        server = ServerProcess(
            data_dir=root,
            database_url=f"sqlite+aiosqlite:///{database}",
            # The read is what is measured; the mirror would be rewriting a million lines.
            env={"LEDGER_MIRROR_ENABLED": "false"},
        ).start()
        try:
            latencies = asyncio.run(_read_latencies(server.base_url, requests))
        finally:
            server.stop()
    quantiles = statistics.quantiles(latencies, n=100)
    return statistics.median(latencies), quantiles[98]


def print_ingest(
    baseline: float,
    bare: IngestRates,
    noop: IngestRates,
    lean: IngestRates,
    product: IngestRates,
    workers: IngestRates,
) -> None:
    """The product lines and the lean same-job route (the ceiling) as ratios to the three
    same-run baselines, and the issue 27 targets for both."""
    single_clients = f"single ({CLIENTS} clients)"
    batched_clients = f"batched x{BATCH} ({BATCH_CLIENTS} clients)"
    print(f"same-run baselines:  {single_clients:>26} {batched_clients:>26}")
    print(f"  gym (flock+write+fsync, {CLIENTS} writers)  {baseline:10,.0f}/s")
    for label, rates in ((BARE.label, bare), (NOOP.label, noop)):
        print(f"  {label:46} {rates.single:10,.0f}/s {rates.batched:18,.0f}/s")
    print(
        f"{'':48} {'single':>10} {'x no-op':>8} {'x bare':>7} {'x gym':>6}"
        f" {'batched':>10} {'x bare':>7} {'x gym':>6}"
    )
    lines = ((LEAN.label, lean), (PRODUCT.label, product), (PRODUCT_WORKERS.label, workers))
    for label, rates in lines:
        print(
            f"  {label:46} {rates.single:8,.0f}/s {rates.single / noop.single:8.2f}"
            f" {rates.single / bare.single:7.2f} {rates.single / baseline:6.2f}"
            f" {rates.batched:8,.0f}/s {rates.batched / bare.batched:7.2f}"
            f" {rates.batched / baseline:6.2f}"
        )
    for label, rates in (("targets (issue 27), ledger", product), ("  the lean ceiling", lean)):
        print(f"{label}: {'; '.join(_targets(rates, bare, noop, baseline))}")


def _targets(rates: IngestRates, bare: IngestRates, noop: IngestRates, gym: float) -> list[str]:
    """Issue 27's ingest targets, each with its ratio and MET or MISSED."""
    targets = (
        ("single >= 1.5x bare", rates.single / bare.single, 1.5),
        ("single >= 0.3x no-op", rates.single / noop.single, 0.3),
        ("batched >= 0.3x bare", rates.batched / bare.batched, 0.3),
        ("batched >= 2x gym", rates.batched / gym, 2.0),
    )
    return [
        f"{name}: {ratio:.2f}x {'MET' if ratio >= floor else 'MISSED'}"
        for name, ratio, floor in targets
    ]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench captures")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument(
        "--no-read", action="store_true", help="ingest only (the read needs a 1M-call database)"
    )
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    # --quick: enough single captures per server that the diagnostic differences are not noise.
    per_client = 30 if args.quick else 60
    batches = 2 if args.quick else 6
    calls = 20_000 if args.quick else 1_000_000
    requests = 200 if args.quick else 1000

    baseline = measure_baseline(per_client)
    bodies = IngestBodies.build(per_client, batches)
    bare = measure_ingest(BARE, bodies)
    noop = measure_ingest(NOOP, bodies)
    lean = measure_ingest(LEAN, bodies)
    product = measure_ingest(PRODUCT, bodies)
    workers = measure_ingest(PRODUCT_WORKERS, bodies)
    diagnostics = [measure_ingest(config, bodies) for config in DIAGNOSTICS]
    no_projector = measure_ingest(NO_PROJECTOR, bodies)
    print_ingest(baseline, bare, noop, lean, product, workers)
    print_diagnostics(product, diagnostics, no_projector)
    print(f"load average after ingest: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.no_read:
        return
    p50, p99 = measure_read(calls, requests)
    print(
        f"ng_model_call_capture, 50 calls, {calls:,} calls in DB: "
        f"p50 {p50:.2f} ms (target <= 10), p99 {p99:.2f} ms (target <= 50)"
    )
