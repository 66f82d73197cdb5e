"""``LedgerStore.read_sync``: a synchronous read in one snapshot, on both backends."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Connection, func, select, text
from sqlalchemy.exc import OperationalError

from ledger.log.records import NewEvent
from ledger.log.store import LedgerStore
from ledger.log.tables import events


def _count(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(events)).scalar_one())


async def test_a_sync_read_sees_committed_events(store: LedgerStore) -> None:
    assert await store.read_sync(_count) == 0
    await store.append(NewEvent("rollout.retired", {"had_rows": False}, rollout_id="r1"))
    assert await store.read_sync(_count) == 1


async def test_concurrent_sync_reads_each_see_one_snapshot(store: LedgerStore) -> None:
    def twice(conn: Connection) -> tuple[int, int]:
        return _count(conn), _count(conn)

    appends = [
        store.append(NewEvent("rollout.retired", {"had_rows": False}, rollout_id=f"r{n}"))
        for n in range(20)
    ]
    reading = asyncio.gather(*(store.read_sync(twice) for _ in range(20)))
    await asyncio.gather(*appends)
    for first, second in await reading:
        assert first == second


async def test_sqlite_sync_reads_cannot_write(store: LedgerStore) -> None:
    if not store.is_sqlite:
        pytest.skip("the query_only guard is SQLite's; PostgreSQL reads use the read engine")

    def write(conn: Connection) -> None:
        conn.execute(text("CREATE TABLE sneaky (x INTEGER)"))

    with pytest.raises(OperationalError, match=r"readonly|read-only|query_only"):
        await store.read_sync(write)
