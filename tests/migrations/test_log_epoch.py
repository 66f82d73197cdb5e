"""Revision 0006 (the log's epoch) up and down with data on both backends."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import insert, inspect, select, text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.log import migrate
from ledger.log.engines import create_async_db_engine
from ledger.log.epoch import read_epoch
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_RETIRED
from ledger.log.store import LedgerStore
from ledger.log.verify import verify_chain
from ledger.mirror.checkpoint import load_checkpoint
from ledger.mirror.tables import mirror_checkpoints

BEFORE = "0005_trajectory_entries"
REVISION = "0006_log_epoch"


async def _append(url: str, count: int) -> None:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        for n in range(count):
            await store.append(NewEvent(ROLLOUT_RETIRED, {"had_rows": False}, f"r{n}"))
    finally:
        await store.close()


async def test_upgrade_gives_the_log_an_epoch_and_keeps_the_checkpoint_trusted(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    await migrate.upgrade(url, BEFORE)
    await _append(url, 5)
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.begin() as conn:
            # A checkpoint as revision 0005 stores it (no epoch column yet).
            await conn.execute(
                text("INSERT INTO mirror_checkpoints (name, seq, updated_at) VALUES (:n, 5, :t)"),
                {"n": "jsonl-mirror", "t": datetime.now(UTC)},
            )
        await migrate.upgrade(url, REVISION)
        async with engine.connect() as conn:
            epoch = await read_epoch(conn)
            checkpoint = await load_checkpoint(conn)
            chain = await verify_chain(conn)
        assert epoch is not None and len(epoch) == 32
        assert checkpoint.seq == 5 and checkpoint.trusted
        assert chain.ok and chain.events == 5

        await migrate.downgrade(url, BEFORE)
        async with engine.connect() as conn:
            tables = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
            columns = await conn.run_sync(
                lambda sync: {c["name"] for c in inspect(sync).get_columns("mirror_checkpoints")}
            )
            seqs = (await conn.execute(text("SELECT seq FROM mirror_checkpoints"))).scalars().all()
            assert (await verify_chain(conn)).events == 5
        assert "log_identity" not in tables
        assert "epoch" not in columns
        assert seqs == [5]

        # Up again: a new log identity (the id is random), the checkpoint adopted into it.
        await migrate.upgrade(url)
        async with engine.connect() as conn:
            again = await read_epoch(conn)
            assert (await load_checkpoint(conn)).trusted
        assert again is not None and again != epoch
    finally:
        await engine.dispose()


async def test_a_checkpoint_without_the_logs_epoch_is_not_trusted(database_url: str) -> None:
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                insert(mirror_checkpoints).values(
                    name="jsonl-mirror", seq=3, updated_at=datetime.now(UTC), epoch="elsewhere"
                )
            )
        async with engine.connect() as conn:
            checkpoint = await load_checkpoint(conn)
            stored = (await conn.execute(select(mirror_checkpoints.c.epoch))).scalar()
        assert stored == "elsewhere"
        assert checkpoint.seq == 3 and not checkpoint.trusted
    finally:
        await engine.dispose()
