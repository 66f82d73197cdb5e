"""What the witnessed head costs (issue 31 §1): capture ingest with checkpoints published beside
the same server without them, and the start-up check of ``serve`` on a 1,000,000-event store.

Ingest: ``bench captures``' clients and bodies (32 single-capture clients, then 8 clients of
100-capture batches) against a real ``ledger serve`` with the default checkpoint interval, with
checkpoints every 0.1 s (fifty times as often), and with checkpoints off; the three alternate,
``--rounds`` times, each on a fresh database. The cost is the ratio to the run without.

Start-up check: a store of 1,000,000 events (``--events``) whose chain and rollouts rows are
written directly with sqlite3 (~1 KB capture payloads), cached under ``bench-data/``. Timed, each
beside a plain read of the events table in the same run: ``PRAGMA quick_check``, and the rest of
the check (the head against a checkpoint 5,000 events behind it, the tail after it, the fences).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import create_engine

from benchmarks.bench_captures import IngestBodies, IngestRates, IngestServer, measure_ingest
from benchmarks.cached_databases import cached_database
from ledger.log import migrate
from ledger.log.chain import GENESIS_HASH, canonical_header, chain_hash
from ledger.log.checkpoints import sign_head
from ledger.log.head_check import compare_with_checkpoints, fence_problems, verify_tail
from ledger.log.integrity import quick_check_problems
from ledger.log.witness import WitnessedCheckpoint

DESCRIPTION = "checkpoints' cost to capture ingest; the start-up check at 1,000,000 events"

WITH_DEFAULT = IngestServer("checkpoints every 5 s (default)")
WITH_OFTEN = IngestServer("checkpoints every 0.1 s", env={"LEDGER_CHECKPOINT_INTERVAL_S": "0.1"})
WITHOUT = IngestServer("checkpoints off (baseline)", env={"LEDGER_CHECKPOINTS_ENABLED": "false"})
ROLLOUTS = 10_000
BEHIND = 5_000


def _payload(n: int) -> str:
    exchange = {"model_call_id": f"call-{n}", "request": {"messages": [{"content": "x" * 900}]}}
    return json.dumps(
        {"exchange": exchange, "model_call_id": f"call-{n}"},
        sort_keys=True,
        separators=(",", ":"),
    )


async def _build_log(url: str, events: int) -> None:
    await migrate.upgrade(url)
    path = url.split("///", 1)[1]
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    started = datetime(2026, 12, 1, tzinfo=UTC)
    prev = GENESIS_HASH
    rows = []
    for seq in range(1, events + 1):
        payload = _payload(seq)
        digest = hashlib.sha256(payload.encode()).hexdigest()
        at = started + timedelta(microseconds=seq)
        rollout = f"r{seq % ROLLOUTS}"
        header = canonical_header(
            seq=seq,
            recorded_at=at,
            kind="model_call.captured",
            schema_version=1,
            rollout_id=rollout,
            generation=0,
            idempotency_key=None,
        )
        prev = chain_hash(prev, header, digest)
        rows.append(
            (
                seq,
                at.isoformat(sep=" "),
                "model_call.captured",
                1,
                rollout,
                0,
                payload,
                digest,
                prev,
            )
        )
        if len(rows) == 20_000 or seq == events:
            conn.executemany(
                "INSERT INTO events (seq, recorded_at, kind, schema_version, rollout_id, "
                "generation, payload, payload_sha256, hash) VALUES (?,?,?,?,?,?,?,?,?)",
                rows,
            )
            conn.commit()
            rows = []
    conn.executemany(
        "INSERT INTO rollouts VALUES (?, 0, 'live', ?, ?, ?, ?)",
        [
            (f"r{n}", n or ROLLOUTS, events - (events - n) % ROLLOUTS, started, started)
            for n in range(ROLLOUTS)
        ],
    )
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _timed(fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def measure_startup_check(events: int) -> None:
    database = cached_database(
        f"checkpoints-{events}", f"{events:,}-event log", lambda url: _build_log(url, events)
    )
    size_mb = database.stat().st_size / 1e6
    engine = create_engine(f"sqlite:///{database.resolve()}")
    key = Ed25519PrivateKey.generate()
    with engine.connect() as conn:
        seq, chain = conn.exec_driver_sql(
            "SELECT seq, hash FROM events WHERE seq = ?", (events - BEHIND,)
        ).one()
        checkpoint = sign_head(key, seq=seq, chain_hash=chain, log_epoch="", at=datetime.now(UTC))
        witnessed = [WitnessedCheckpoint(checkpoint, "bench")]

        def plain_read() -> None:
            conn.exec_driver_sql("SELECT count(*), sum(length(payload)) FROM events").one()

        def quick_check() -> None:
            assert quick_check_problems(conn) == []

        def the_rest() -> None:
            report = compare_with_checkpoints(conn, witnessed, key.public_key())
            assert report.ok
            assert verify_tail(conn, report.latest) is None
            assert fence_problems(conn) == []

        figures = {
            "plain read of every event's payload (baseline)": _timed(plain_read),
            "PRAGMA quick_check": _timed(quick_check),
            f"checkpoint, tail of {BEHIND:,} events, fences": _timed(the_rest),
        }
    engine.dispose()
    print(f"\nstart-up check, {events:,} events, {size_mb:,.0f} MB (file cached, warm):")
    for label, seconds in figures.items():
        print(f"  {label:50} {seconds:8.2f} s")


def measure_ingest_cost(rounds: int, per_client: int) -> None:
    bodies = IngestBodies.build(per_client, max(1, per_client // 10))
    results: dict[str, list[IngestRates]] = {}
    for _ in range(rounds):
        for config in (WITHOUT, WITH_DEFAULT, WITH_OFTEN):
            results.setdefault(config.label, []).append(measure_ingest(config, bodies))
    base = results[WITHOUT.label]
    print(f"\ncapture ingest, {rounds} alternated rounds (median captures/s; ratio to off):")
    for label, rates in results.items():
        single = statistics.median(r.single for r in rates)
        batched = statistics.median(r.batched for r in rates)
        ratio_single = single / statistics.median(r.single for r in base)
        ratio_batched = batched / statistics.median(r.batched for r in base)
        print(
            f"  {label:36} single {single:8,.0f} ({ratio_single:.3f}x)   "
            f"batched {batched:8,.0f} ({ratio_batched:.3f}x)"
        )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench checkpoints")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-client", type=int, default=60)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="1 round, 100,000 events")
    parser.add_argument("--no-ingest", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.events = 1, 100_000
    if not args.no_ingest:
        measure_ingest_cost(args.rounds, args.per_client)
    measure_startup_check(args.events)
