"""Tombstones applied set-based (log/ended_generations.py): a command that deletes rollouts and
goes on writing to the same ids leaves exactly the rows it would have left with each removal
applied at its tombstone, and ``ledger verify``'s replay agrees, on both backends."""

from __future__ import annotations

import contextlib
from typing import Any

from sqlalchemy import Connection, func, select

from ledger.app.areas import default_projectors
from ledger.app.bootstrap import catch_up_views
from ledger.areas.captures.service import append_one, prepare_exchange
from ledger.areas.captures.tables import capture_calls, capture_state
from ledger.areas.lineage import queries as lineage
from ledger.areas.lineage.tables import lineage_rows
from ledger.areas.observations.tables import observation_calls, observation_records
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.log.verify import verify_projections
from tests.lineage.rows import committed_row
from tests.support.exchanges import chat_exchange

TABLES = (lineage_rows, capture_calls, capture_state, observation_calls, observation_records)


def _counts(conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Rows per (table, rollout, generation)."""
    return {
        table.name: [
            tuple(row)
            for row in conn.execute(
                select(table.c.rollout_id, table.c.generation, func.count())
                .group_by(table.c.rollout_id, table.c.generation)
                .order_by(table.c.rollout_id, table.c.generation)
            )
        ]
        for table in TABLES
    }


async def test_delete_then_reuse_in_one_command(store: LedgerStore) -> None:
    ids = [f"t{n}" for n in range(5)]
    first = [prepare_exchange(rollout_id, chat_exchange(model_call_id="a")) for rollout_id in ids]
    again = [prepare_exchange(rollout_id, chat_exchange(model_call_id="b")) for rollout_id in ids]

    def command(tx: WriteTransaction) -> tuple[dict[str, Any], list[str]]:
        for rollout_id, prepared in zip(ids, first, strict=True):
            lineage.record_row(tx, rollout_id, committed_row(rollout_id, "c0"))
            append_one(tx, prepared)
        removed = lineage.delete(tx, ids)
        after_delete = _counts(tx.conn)  # the removals are visible to SQL in the command
        # The same ids again, generation 1, and a second delete of two of them.
        for rollout_id, prepared in zip(ids, again, strict=True):
            append_one(tx, prepared)
            lineage.record_row(tx, rollout_id, committed_row(rollout_id, "c1"))
        lineage.delete(tx, ids[:2])
        return after_delete, removed.removed

    after_delete, removed = await store.execute(command)
    assert removed == ids
    assert all(rows == [] for rows in after_delete.values()), after_delete
    kept = [(rollout_id, 1, 1) for rollout_id in ids[2:]]
    await catch_up_views(store)
    async with store.read() as conn:
        at_end = await conn.run_sync(_counts)
    assert at_end == {
        "lineage_rows": kept,
        "capture_calls": kept,
        # One state row per rollout that has one (a deleted rollout's row is gone).
        "capture_state": kept,
        "observation_calls": kept,
        "observation_records": kept,
    }
    async with store.read() as conn:
        report = await verify_projections(
            conn, store.catalogue, default_projectors(check_templates=True)
        )
    assert report.ok, report.differences


async def test_a_failed_command_keeps_the_rows_its_tombstones_would_remove(
    store: LedgerStore,
) -> None:
    await store.execute(lambda tx: lineage.record_row(tx, "kept", committed_row("kept", "c0")))

    def failing(tx: WriteTransaction) -> None:
        lineage.delete(tx, ["kept"])
        raise RuntimeError("the command fails after its tombstone")

    with contextlib.suppress(RuntimeError):
        await store.execute(failing)
    async with store.read() as conn:
        rows = (await conn.execute(select(func.count()).select_from(lineage_rows))).scalar()
    assert rows == 1
    await store.execute(lambda tx: lineage.delete(tx, ["kept"]))
    async with store.read() as conn:
        rows = (await conn.execute(select(func.count()).select_from(lineage_rows))).scalar()
    assert rows == 0
