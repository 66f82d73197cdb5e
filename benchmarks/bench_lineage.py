"""Lineage: manifest reads over HTTP in a big log, and 4096-id retire/delete in one request,
beside a Gym-style file ledger measured in the same run.

Usage: scripts/bench lineage [--quick] [--postgres-url=URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.serving import wait_until_serving
from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.lineage.queries import record_row
from ledger.gym.lineage import build_manifest
from ledger.log import migrate
from ledger.log.canonical import standard_json
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction

DESCRIPTION = "manifest p50/p99 over HTTP in a large log; retire/delete 4096 ids; file baseline"

CONTROL = "/training-token-capture/control"
TOKEN = "bench-token"
ROWS_PER_ROLLOUT = 20
BATCH = 4096


def hex64(seed: str) -> str:
    import hashlib

    return hashlib.sha256(seed.encode()).hexdigest()


def row(rollout_id: str, n: int) -> dict[str, Any]:
    """A committed child (or root for n == 0) row, as Gym writes it."""
    prev = n * 10
    return {
        "model_call_id": f"c{n}",
        "fingerprint": hex64(f"fp{rollout_id}{n}"),
        "context_len": n + 1,
        "context_digest": hex64(f"ctx{rollout_id}{n}"),
        "digest": hex64(f"cum{rollout_id}{n}"),
        "parent_call_id": None if n == 0 else f"c{n - 1}",
        "staging_key": f"{rollout_id}/c{n}",
        "weight_version": 3,
        "prev_len": prev,
        "delta_len": 10,
        "cum_len": prev + 10,
        "staging_digest": hex64(f"st{rollout_id}{n}"),
        "extras_digest": hex64("extras"),
        "mode": "text" if n == 0 else "token_in",
        "admitted_at": 1755600000.5 + n,
        "staging_chain": [f"{rollout_id}/c{i}" for i in range(n + 1)],
        "chain_hash": hex64(f"ch{rollout_id}{n}"),
        "cumulative_hash": hex64(f"cum{rollout_id}{n}"),
        "response_id": f"resp-{n}",
        "output_fingerprint": None,
        "continuation_fingerprint": None,
        "fingerprint_version": 1,
    }


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def show(label: str, samples_ms: list[float]) -> None:
    print(
        f"  {label:44} p50 {percentile(samples_ms, 0.5):8.3f} ms   "
        f"p99 {percentile(samples_ms, 0.99):8.3f} ms   (n={len(samples_ms)})"
    )


async def fill(url: str, events: int) -> None:
    """Rollouts of 20 rows each until the log holds ``events`` events; chunked commands."""
    store = LedgerStore(url, default_catalogue(), write_side_projectors(), max_batch=64)
    await store.open()
    try:
        rollouts = max(BATCH + 1, events // ROWS_PER_ROLLOUT)
        started = time.perf_counter()
        per_command = 100  # rollouts per command (2,000 rows)
        for first in range(0, rollouts, per_command):
            ids = [f"fill-{i}" for i in range(first, min(rollouts, first + per_command))]

            def command(tx: WriteTransaction, chunk: list[str] = ids) -> None:
                for rollout_id in chunk:
                    for n in range(ROWS_PER_ROLLOUT):
                        record_row(tx, rollout_id, row(rollout_id, n))

            await store.execute(command)
            done = min(rollouts, first + per_command) * ROWS_PER_ROLLOUT
            if first % (per_command * 50) == 0:
                print(
                    f"  filled {done:>9} events ({time.perf_counter() - started:.0f}s)", flush=True
                )
    finally:
        await store.close()


def start_server(url: str, data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "LEDGER_DATA_DIR": str(data_dir),
        "LEDGER_DATABASE_URL": url,
        "LEDGER_CONTROL_TOKEN": TOKEN,
        "LEDGER_MIRROR_ENABLED": "false",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "ledger", "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return wait_until_serving(process, port)


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000, result


def bench_ledger(url: str, data_dir: Path, reads: int, appends: int) -> dict[str, float]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = start_server(url, data_dir, port)
    figures: dict[str, float] = {}
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as http:
            target = "fill-7"
            path = f"{CONTROL}/rollouts/{target}/manifest"
            assert len(http.get(path).json()["records"]) == ROWS_PER_ROLLOUT
            for _ in range(50):
                http.get(path)
            samples = [timed(http.get, path)[0] for _ in range(reads)]
            show("ledger manifest read (HTTP, 20 rows)", samples)
            figures["manifest_p50"] = percentile(samples, 0.5)
            figures["manifest_p99"] = percentile(samples, 0.99)

            appended = []
            for n in range(appends):
                body = row("append-bench", n)
                appended.append(
                    timed(http.post, "/v1/rollouts/append-bench/ledger/rows", json=body)[0]
                )
            show("ledger row append (HTTP, durable commit)", appended)

            ids = [f"fill-{i}" for i in range(BATCH)]
            for action in ("retire", "delete"):
                ms, reply = timed(
                    http.post,
                    f"{CONTROL}/rollouts/{action}",
                    json={"rollout_ids": ids},
                    timeout=600,
                )
                removal = reply.json()
                print(
                    f"  ledger {action} of {BATCH} ids, one request {ms:12.1f} ms   "
                    f"(removed {len(removal['removed'])}, absent {len(removal['absent'])})"
                )
                figures[action] = ms
    finally:
        server.terminate()
        server.wait(timeout=60)
    return figures


# --- the Gym-style file ledger baseline --------------------------------------------------


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_append(directory: Path, rollout_id: str, record: dict[str, Any]) -> None:
    path = directory / f"{rollout_id}.lineage.jsonl"
    created = not path.exists()
    with path.open("ab") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            handle.write((standard_json(record) + "\n").encode())
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    if created:
        fsync_dir(directory)


def file_manifest(directory: Path, rollout_id: str) -> Any:
    if (directory / f"{rollout_id}.lineage.retired").exists():
        raise LookupError("retired")
    path = directory / f"{rollout_id}.lineage.jsonl"
    with path.open("rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
        try:
            rows = [json.loads(line) for line in handle.read().splitlines() if line.strip()]
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return build_manifest(rollout_id, rows).model_dump(mode="json")


def file_retire(directory: Path, ids: list[str]) -> None:
    for rollout_id in ids:
        fd = os.open(directory / f"{rollout_id}.lineage.retired", os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)
    fsync_dir(directory)
    for rollout_id in ids:
        with contextlib.suppress(FileNotFoundError):
            (directory / f"{rollout_id}.lineage.jsonl").unlink()
    fsync_dir(directory)


def file_delete(directory: Path, ids: list[str]) -> None:
    for rollout_id in ids:
        for suffix in (".lineage.jsonl", ".lineage.retired"):
            with contextlib.suppress(FileNotFoundError):
                (directory / f"{rollout_id}{suffix}").unlink()
    fsync_dir(directory)


def bench_files(directory: Path, reads: int, appends: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    ids = [f"fill-{i}" for i in range(BATCH)]
    # One durable row per rollout for the batch (each append: flock + write + fsync).
    appended = [timed(file_append, directory, rid, row(rid, 0))[0] for rid in ids]
    for n in range(1, ROWS_PER_ROLLOUT):
        file_append(directory, "fill-7", row("fill-7", n))
    more = [
        timed(file_append, directory, "append-bench", row("append-bench", n))[0]
        for n in range(appends)
    ]
    show("file row append (flock+write+fsync)", appended[:appends] + more)
    for _ in range(50):
        file_manifest(directory, "fill-7")
    samples = [timed(file_manifest, directory, "fill-7")[0] for _ in range(reads)]
    show("file manifest read (in process, no HTTP)", samples)
    figures["manifest_p50"] = percentile(samples, 0.5)
    for action, fn in (("retire", file_retire), ("delete", file_delete)):
        ms, _ = timed(fn, directory, ids)
        print(f"  file {action} of {BATCH} ids {ms:28.1f} ms")
        figures[action] = ms
    return figures


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench lineage")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument(
        "--postgres-url", help="measure the ledger on PostgreSQL (an empty database)"
    )
    args = parser.parse_args(argv)
    events = 20_000 if args.quick else 1_000_000
    reads = 300 if args.quick else 2000
    appends = 50 if args.quick else 300
    with tempfile.TemporaryDirectory(prefix="bench-lineage-") as scratch:
        root = Path(scratch)
        url = args.postgres_url or f"sqlite+aiosqlite:///{root / 'ledger.db'}"
        backend = "postgresql" if args.postgres_url else "sqlite"
        total = max(BATCH + 1, events // ROWS_PER_ROLLOUT) * ROWS_PER_ROLLOUT
        print(f"ledger ({backend}): filling {total} events ...", flush=True)
        asyncio.run(migrate.upgrade(url))
        asyncio.run(fill(url, events))
        ledger = bench_ledger(url, root / "data", reads, appends)
        files_dir = root / "gym-files"
        files_dir.mkdir()
        print("Gym-style file ledger (baseline, same run):", flush=True)
        files = bench_files(files_dir, reads, appends)
    print(
        f"summary: manifest p50 {ledger['manifest_p50']:.2f} ms / p99 "
        f"{ledger['manifest_p99']:.2f} ms (targets 5 / 25); retire 4096 "
        f"{ledger['retire']:.0f} ms vs file {files['retire']:.0f} ms; delete 4096 "
        f"{ledger['delete']:.0f} ms vs file {files['delete']:.0f} ms"
    )
