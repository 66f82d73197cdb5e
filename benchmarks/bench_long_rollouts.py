"""Single captures into long rollouts: the per-capture cost of keeping the enriched record.

Every capture updates its rollout's stored record in the append transaction (issue 5). A
capture-only record is stored as a template that reads fill with the calls' stored pieces
(store/record_pieces.py), so a capture adds its pieces and rewrites a small template. The
baseline, measured in the same run on the same kind of database, also rebuilds the whole
record from every call on each capture (``default_projectors(check_templates=True)``, what
``ledger verify`` runs; the rebuild is what every capture cost before templates). The
rollout is built one capture per write command, as model servers send them, and the time per
capture is reported at several rollout lengths: rebuilding is O(calls) per capture, so
O(calls²) per rollout.

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
from ledger.app.areas import default_catalogue, default_projectors
from ledger.areas.captures.service import CaptureService
from ledger.log import migrate
from ledger.log.store import LedgerStore

DESCRIPTION = "single captures into one long rollout: record template vs full rebuild per capture"


async def _per_capture_ms(
    database: Path, *, assemble: bool, calls: int, checkpoints: list[int]
) -> dict[int, float]:
    """Mean ms per capture over the 10 captures before each checkpoint length."""
    url = f"sqlite+aiosqlite:///{database}"
    await migrate.upgrade(url)
    projectors = default_projectors(check_templates=not assemble)
    store = LedgerStore(url, default_catalogue(), projectors)
    await store.open()
    captures = CaptureService(store)
    figures: dict[int, float] = {}
    try:
        started = time.perf_counter()
        for n in range(1, calls + 1):
            if n % 10 == 1:
                started = time.perf_counter()
            await captures.append("long-rollout", exchange(uuid.uuid4().hex))
            if n in checkpoints:
                figures[n] = (time.perf_counter() - started) / 10 * 1000
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
    print("ms per single capture (mean of the 10 captures up to that rollout length)")
    print(f"{'calls in rollout':>18} {'full rebuild':>13} {'template':>10} {'speed-up':>9}")
    for length in checkpoints:
        print(
            f"{length:>18} {full[length]:>13.2f} {assembled[length]:>10.2f}"
            f" {full[length] / assembled[length]:>8.1f}x"
        )
