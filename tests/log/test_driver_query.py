"""Reads run on the driver's cursor return what the Core path returns, typed the same."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, Connection, Integer, String, bindparam, select, text
from sqlalchemy.sql.elements import BindParameter

from ledger.areas.captures.tables import capture_state
from ledger.log.driver import DriverQuery
from ledger.log.engines import create_async_db_engine
from ledger.log.tables import rollouts

ROLLOUT = {
    "generation": 3,
    "state": "retired",
    "first_seq": 7,
    "last_seq": 2**40,
    "created_at": datetime(2026, 11, 29, 23, 59, 58, 123456, tzinfo=UTC),
    "updated_at": datetime(2026, 11, 30, 0, 0, 0, 1, tzinfo=UTC),
}
STATE = {
    "generation": 3,
    "next_call_index": 5,
    "record_count": 4,
    "damaged_count": 1,
    "has_evidence": True,
    "incomplete": False,
    "pending_count": 0,
    "cleared_seq": None,
    "last_seq": 2**40,
}

BY_ID: BindParameter[str] = bindparam("b_rollout_id")


async def _compare(database_url: str, run: Any) -> Any:
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(rollouts.insert(), {"rollout_id": "r1", **ROLLOUT})
            await conn.execute(capture_state.insert(), {"rollout_id": "r1", **STATE})
            return await conn.run_sync(run)
    finally:
        await engine.dispose()


async def test_typed_columns_come_back_as_core_returns_them(database_url: str) -> None:
    statements = [
        select(rollouts).where(rollouts.c.rollout_id == BY_ID),
        select(capture_state).where(capture_state.c.rollout_id == BY_ID),
    ]

    def run(sync: Connection) -> list[tuple[Any, Any]]:
        pairs = []
        for statement in statements:
            core = sync.execute(statement, {"b_rollout_id": "r1"}).all()
            driver = DriverQuery(statement).all(sync, {"b_rollout_id": "r1"})
            pairs.append((core, driver))
        return pairs

    pairs = await _compare(database_url, run)
    for core, driver in pairs:
        assert len(core) == len(driver) == 1
        assert tuple(core[0]) == tuple(driver[0])
        assert core[0]._asdict() == driver[0]._asdict()
    (_, [rollout]), (_, [state]) = pairs
    # A datetime, not SQLite's text (Core leaves it naive there, and so does the driver path).
    assert rollout.created_at.replace(tzinfo=UTC) == ROLLOUT["created_at"]
    assert state.has_evidence is True and state.incomplete is False


async def test_text_queries_with_declared_columns_and_no_rows(database_url: str) -> None:
    query = DriverQuery(
        text(
            "SELECT r.generation AS generation, s.next_call_index AS next_call_index, "
            "r.last_seq AS last_seq, r.state AS state FROM rollouts r "
            "LEFT JOIN capture_state s ON s.rollout_id = r.rollout_id WHERE r.rollout_id = :id"
        ).columns(generation=Integer, next_call_index=Integer, last_seq=BigInteger, state=String)
    )

    def run(sync: Connection) -> tuple[Any, Any]:
        return query.first(sync, {"id": "r1"}), query.first(sync, {"id": "absent"})

    found, missing = await _compare(database_url, run)
    assert missing is None
    assert (found.generation, found.next_call_index, found.last_seq, found.state) == (
        3,
        5,
        2**40,
        "retired",
    )


async def test_plain_tuples_equal_cores_rows_with_unnamed_columns(database_url: str) -> None:
    """``tuples`` gives the driver's rows as plain tuples, processed values included (a
    datetime, a boolean), and accepts unnamed expressions among the columns."""
    statement = select(
        rollouts.c.rollout_id,
        rollouts.c.created_at,
        capture_state.c.has_evidence,
        capture_state.c.next_call_index + rollouts.c.generation,
    ).where(rollouts.c.rollout_id == capture_state.c.rollout_id, rollouts.c.rollout_id == BY_ID)

    def run(sync: Connection) -> tuple[Any, Any]:
        core = sync.execute(statement, {"b_rollout_id": "r1"}).tuples().all()
        return core, DriverQuery(statement).tuples(sync, {"b_rollout_id": "r1"})

    core, driver = await _compare(database_url, run)
    assert [tuple(row) for row in core] == [tuple(row) for row in driver]
    [(rollout_id, created_at, has_evidence, total)] = driver
    assert (rollout_id, has_evidence, total) == ("r1", True, 8)
    assert created_at.replace(tzinfo=UTC) == ROLLOUT["created_at"]
