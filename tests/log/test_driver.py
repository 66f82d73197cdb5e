"""Statements run on the driver's cursor store exactly what the Core path stores."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Text, bindparam, cast, select
from sqlalchemy.exc import DBAPIError

from ledger.log.driver import DriverStatement
from ledger.log.engines import create_async_db_engine
from ledger.log.tables import events, rollouts

ROW = {
    "generation": 3,
    "state": "retired",
    "first_seq": 7,
    "last_seq": 2**40,
    "created_at": datetime(2026, 11, 29, 23, 59, 58, 123456, tzinfo=UTC),
    "updated_at": datetime(2026, 11, 30, 0, 0, 0, 1, tzinfo=UTC),
}


async def test_driver_rows_equal_core_rows_column_by_column(database_url: str) -> None:
    insert = DriverStatement(rollouts.insert())
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(rollouts.insert(), {"rollout_id": "via-core", **ROW})
            count = await conn.run_sync(
                lambda sync: insert.execute(sync, {"rollout_id": "via-driver", **ROW})
            )
            assert count == 1
        async with engine.connect() as conn:
            as_text = (
                await conn.execute(
                    select(*(cast(c, Text) for c in rollouts.c)).order_by(rollouts.c.rollout_id)
                )
            ).all()
            typed = (await conn.execute(select(rollouts).order_by(rollouts.c.rollout_id))).all()
    finally:
        await engine.dispose()
    (core_text, driver_text), (core_row, driver_row) = as_text, typed
    assert core_text[1:] == driver_text[1:]
    assert core_row[1:] == driver_row[1:]
    assert (core_row[0], driver_row[0]) == ("via-core", "via-driver")


async def test_an_update_reports_its_rowcount(database_url: str) -> None:
    update = DriverStatement(
        rollouts.update().where(rollouts.c.rollout_id == bindparam("b_rollout_id"))
    )
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(rollouts.insert(), {"rollout_id": "r1", **ROW})
            params = {"b_rollout_id": "r1", "state": "live", "last_seq": 8}
            assert await conn.run_sync(lambda sync: update.execute(sync, params)) == 1
            missing = {"b_rollout_id": "nope", "state": "live", "last_seq": 8}
            assert await conn.run_sync(lambda sync: update.execute(sync, missing)) == 0
            row = (await conn.execute(select(rollouts.c.state, rollouts.c.last_seq))).one()
    finally:
        await engine.dispose()
    assert tuple(row) == ("live", 8)


async def test_driver_errors_are_sqlalchemy_errors(database_url: str) -> None:
    insert = DriverStatement(events.insert())
    row = {
        "seq": 1,
        "recorded_at": datetime.now(UTC),
        "kind": "k",
        "schema_version": 1,
        "rollout_id": None,
        "generation": 0,
        "idempotency_key": None,
        "payload": "{}",
        "payload_sha256": "a",
        "hash": "b",
    }
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.connect() as conn, conn.begin():
            await conn.run_sync(lambda sync: insert.execute(sync, row))
            with pytest.raises(DBAPIError, match=r"(?i)unique|duplicate"):
                await conn.run_sync(lambda sync: insert.execute(sync, row))
    finally:
        await engine.dispose()
