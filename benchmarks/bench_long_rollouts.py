"""Single captures into long rollouts: the views' cost of a capture as its rollout grows.

Every capture updates its rollout's stored record in the observations view, which follows the
log (docs/architecture.md). A capture-only record is stored as a template that reads fill with
the calls' stored pieces, so a capture adds its pieces and rewrites a small template. The
baseline, measured in the same run on the same kind of database, also rebuilds the whole
record from every call on each capture (``view_projectors(check_templates=True)``, what
``ledger verify`` runs; the rebuild is what every capture cost before templates). The
rollout is built one capture per write command, as model servers send them, and the views
follow after each one, so each step of the follower applies one capture (its worst case: a
trickle). Timed: that step, per capture, at several rollout lengths; rebuilding is O(calls)
per capture, so O(calls²) per rollout. The append is not timed (bench captures has it).

In-process (no HTTP), SQLite in WAL with ``synchronous=FULL``, ~2 KB chat exchanges.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.bench_captures import exchange
from ledger.app.areas import (
    default_catalogue,
    views_follower,
    write_side_projectors,
)
from ledger.areas.captures.service import CaptureService
from ledger.log import migrate
from ledger.log.store import LedgerStore

DESCRIPTION = "single captures into one long rollout: record template vs full rebuild per capture"


async def _per_capture_ms(
    database: Path, *, assemble: bool, calls: int, checkpoints: list[int]
) -> dict[int, float]:
    """Mean ms of the views' step per capture over the 10 captures before each checkpoint
    length."""
    url = f"sqlite+aiosqlite:///{database}"
    await migrate.upgrade(url)
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    follower = views_follower(store, check_templates=not assemble)
    captures = CaptureService(store)
    figures: dict[int, float] = {}
    try:
        spent = 0.0
        for n in range(1, calls + 1):
            if n % 10 == 1:
                spent = 0.0
            await captures.append("long-rollout", exchange(uuid.uuid4().hex))
            started = time.perf_counter()
            applied = await follower.catch_up()
            spent += time.perf_counter() - started
            assert applied == 1, applied
            if n in checkpoints:
                figures[n] = spent / 10 * 1000
    finally:
        await store.close()
    return figures


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench long_rollouts")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = parser.parse_args(argv)
    checkpoints = [10, 50, 100] if args.quick else [10, 50, 100, 200, 400]
    calls = checkpoints[-1]
    with tempfile.TemporaryDirectory(prefix="bench-long-") as scratch:
        root = Path(scratch)
        full = asyncio.run(
            _per_capture_ms(root / "full.db", assemble=False, calls=calls, checkpoints=checkpoints)
        )
        assembled = asyncio.run(
            _per_capture_ms(
                root / "assembled.db", assemble=True, calls=calls, checkpoints=checkpoints
            )
        )
    print("ms of the views' step per single capture (mean of the 10 up to that rollout length)")
    print(f"{'calls in rollout':>18} {'full rebuild':>13} {'template':>10} {'speed-up':>9}")
    for length in checkpoints:
        print(
            f"{length:>18} {full[length]:>13.2f} {assembled[length]:>10.2f}"
            f" {full[length] / assembled[length]:>8.1f}x"
        )
