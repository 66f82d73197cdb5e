"""Capture ingest in-process (no HTTP): what the writer thread costs per capture.

Through ``CaptureService`` on a ``LedgerStore`` with ``write_side_projectors`` and a fresh SQLite
file (WAL, ``synchronous=FULL``), realistic ~2 KB exchanges:

- batched: commands of 100 captures to one rollout (``append_many``), 8 concurrent senders;
- single: one capture per command (``append``), 32 concurrent tasks.

Each leg prints captures/s and the writer's time per capture (the whole batch run on the writer
thread, commit included, from the writer's metrics hook). Baseline, same run: the same legs on a
store whose only projection is ``rollouts`` (the event append, its hash chain and the commit),
so the difference is what the capture and observations projections cost the writer.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.bench_captures import exchange
from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.service import CaptureService
from ledger.log import migrate
from ledger.log.projector import Projector
from ledger.log.rollouts_projection import RolloutsProjector
from ledger.log.store import LedgerStore

DESCRIPTION = "in-process capture ingest: batched x100 and single (32 tasks), writer ms/capture"

BATCH = 100
BATCH_SENDERS = 8
SINGLE_TASKS = 32


@dataclass
class WriterTime:
    """The writer's metrics hook: total time its batches took, and how many events they wrote."""

    seconds: float = 0.0
    events: int = 0

    def observe_batch(self, size: int, commit_seconds: float, events: int) -> None:
        self.seconds += commit_seconds
        self.events += events

    def set_queue_depth(self, depth: int) -> None:
        pass

    def count_failed_batch(self) -> None:
        pass


async def _open(root: Path, metrics: WriterTime, projectors: list[Projector]) -> LedgerStore:
    url = f"sqlite+aiosqlite:///{root / 'ledger.db'}"
    await migrate.upgrade(url)
    store = LedgerStore(url, default_catalogue(), projectors, synchronous="FULL", metrics=metrics)
    await store.open()
    return store


async def _batched(service: CaptureService, batches_per_sender: int) -> None:
    async def sender(n: int) -> None:
        for b in range(batches_per_sender):
            rollout_id = f"batch-{n}-{b}"
            items = [
                {"rollout_id": rollout_id, "exchange": exchange(uuid.uuid4().hex)}
                for _ in range(BATCH)
            ]
            results = await service.append_many(items)
            assert all(r.status == 201 for r in results), results[0]

    await asyncio.gather(*(sender(n) for n in range(BATCH_SENDERS)))


async def _single(service: CaptureService, per_task: int) -> None:
    async def task(n: int) -> None:
        for _ in range(per_task):
            receipt = await service.append(f"single-{n}", exchange(uuid.uuid4().hex))
            # (call_index is not checked: the baseline store keeps no capture projection)
            assert receipt.created, receipt

    await asyncio.gather(*(task(n) for n in range(SINGLE_TASKS)))


def _rollouts_only() -> list[Projector]:
    return [RolloutsProjector()]


async def _leg(name: str, captures: int, run: Any, projectors: list[Projector]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-ingest-writer-") as scratch:
        metrics = WriterTime()
        store = await _open(Path(scratch), metrics, projectors)
        try:
            started = time.perf_counter()
            await run(CaptureService(store))
            seconds = time.perf_counter() - started
        finally:
            await store.close()
    assert metrics.events == captures, (metrics.events, captures)
    print(
        f"{name:58} {captures / seconds:10,.0f} captures/s"
        f"   writer {1000 * metrics.seconds / captures:6.3f} ms/capture"
        f"   ({captures:,} captures, {seconds:.2f} s)",
        flush=True,
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench ingest_writer")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = parser.parse_args(argv)
    batches_per_sender = 5 if args.quick else 25
    per_task = 60 if args.quick else 300
    batched = batches_per_sender * BATCH_SENDERS * BATCH
    single = per_task * SINGLE_TASKS

    legs = [
        (f"batched x{BATCH} ({BATCH_SENDERS} senders)", batched, _batched, batches_per_sender),
        (f"single ({SINGLE_TASKS} tasks)", single, _single, per_task),
    ]
    for name, captures, run, size in legs:
        for label, projectors in (
            ("baseline, rollouts projection only", _rollouts_only),
            ("ledger, the write side (views follow the log)", write_side_projectors),
        ):
            asyncio.run(
                _leg(
                    f"{name}: {label}",
                    captures,
                    lambda service, run=run, size=size: run(service, size),
                    projectors(),
                )
            )


if __name__ == "__main__":
    main(sys.argv[1:])
