"""Bytes on disk a capture costs: the SQLite database (log and views) per capture, by table.

Captures of ~2 KB (``bench captures``' exchange) in rollouts of 50 calls are appended in
batches through the write side, the views brought to the head, the WAL checkpointed, and each
table's pages counted with SQLite's ``dbstat``. Two shapes: rollouts with captures only, and
rollouts that also have a result (a whole record, stored as its text, not a template).

Baseline, in the same run: Gym's own store of the same captures, its capture lines as
``serialize_capture_line`` writes them (one file of JSONL, what Gym keeps per rollout). Issue 27
asks for 1,000,000 calls of ~2 KB in at most 3 GB of database: 3,000 bytes a capture.

Usage: scripts/bench storage [--captures=N]   (default 20,000; --quick: 5,000)
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bench_captures import exchange
from ledger.app.areas import default_catalogue, view_projectors, write_side_projectors
from ledger.app.bootstrap import catch_up_views
from ledger.areas.captures.events import MODEL_CALL_CAPTURED, ModelCallCaptured
from ledger.areas.observations.service import ObservationService
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from tests.observations.support import EXAMPLE_RESULT

DESCRIPTION = "bytes on disk per ~2 KB capture (log and views, by table) vs Gym's JSONL lines"
CALLS_PER_ROLLOUT = 50
TARGET_BYTES = 3_000


def _append(items: list[tuple[str, dict[str, Any]]]) -> Callable[[WriteTransaction], int]:
    def command(tx: WriteTransaction) -> int:
        for rollout_id, body in items:
            captured = ModelCallCaptured.model_construct(
                model_call_id=body["model_call_id"], exchange=body
            )
            tx.append(MODEL_CALL_CAPTURED, captured, rollout_id=rollout_id)
        return len(items)

    return command


async def _write(path: Path, captures: int, *, results: bool) -> int:
    """The database of ``captures`` captures; returns Gym's JSONL bytes for them."""
    url = f"sqlite+aiosqlite:///{path}"
    await migrate.upgrade(url)
    store = LedgerStore(
        url, default_catalogue(), write_side_projectors(), synchronous="NORMAL", max_batch=64
    )
    await store.open()
    jsonl = 0
    try:
        for start in range(0, captures, 1000):
            items = [
                (f"r-{n // CALLS_PER_ROLLOUT}", exchange(uuid.uuid4().hex))
                for n in range(start, min(start + 1000, captures))
            ]
            jsonl += sum(len(serialize_capture_line(body)) + 1 for _, body in items)
            await store.execute(_append(items))
        if results:
            observations = ObservationService(store)
            for rollout in range(-(-captures // CALLS_PER_ROLLOUT)):
                await observations.record_result(f"r-{rollout}", EXAMPLE_RESULT)
        await catch_up_views(store)
    finally:
        await store.close()
    return jsonl


def _tables(path: Path) -> tuple[int, list[tuple[str, str, int]]]:
    """The file's size and each table's and index's pages: (name, its table, bytes)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = conn.execute(
            "SELECT d.name, COALESCE(s.tbl_name, d.name), SUM(d.pgsize) FROM dbstat d "
            "LEFT JOIN sqlite_schema s ON s.name = d.name GROUP BY d.name ORDER BY 3 DESC"
        ).fetchall()
    return path.stat().st_size, [(str(name), str(table), int(size)) for name, table, size in rows]


def measure(captures: int, *, results: bool) -> None:
    shape = "captures and a result per rollout" if results else "captures only"
    with tempfile.TemporaryDirectory(prefix="bench-storage-") as scratch:
        path = Path(scratch) / "ledger.db"
        jsonl = asyncio.run(_write(path, captures, results=results))
        size, tables = _tables(path)
    per = size / captures
    print(f"\n{shape}: {captures:,} captures")
    print(f"  Gym's JSONL lines (baseline)   {jsonl / captures:8,.0f} B a capture")
    print(
        f"  database file                  {per:8,.0f} B a capture "
        f"({per / (jsonl / captures):.2f}x the lines; target {TARGET_BYTES:,} B: "
        f"{'met' if per <= TARGET_BYTES else 'missed'})"
    )
    for name, _, table_size in tables[:8]:
        print(f"    {name:40} {table_size / captures:8,.0f} B a capture")
    # The floor of any design of the views: what the log and the write side take alone.
    views = {table.name for projector in view_projectors() for table in projector.tables}
    floor = sum(table_size for _, table, table_size in tables if table not in views)
    print(
        f"  of which the log and the write side (the floor without views) {floor / captures:,.0f} B"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench storage")
    parser.add_argument("--captures", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    captures = 5_000 if args.quick else args.captures
    measure(captures, results=False)
    measure(captures, results=True)
