"""health_findings as stored state, on both backends: ``ledger verify`` recomputes the current
rows and fails on a row that disagrees with its record; revision 0009 goes down and up with
data (the follower fills the re-created table again, row for row)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from sqlalchemy import Connection, inspect, select, text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.bootstrap import catch_up_views
from ledger.areas.health.follower import HealthFollower
from ledger.areas.health.tables import health_findings
from ledger.log import migrate
from ledger.log.engines import create_async_db_engine
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from tests.cli.support import invoke
from tests.support.health_append import append_posts
from tests.support.health_run import RAISING_CHECK, PlannedRollout, generate_run

BEFORE = "0008_follow"
VIEWS = {"rollout_health", "rollout_health_findings", "task_health"}


def _append(tx: WriteTransaction, planned: list[PlannedRollout]) -> int:
    return sum(append_posts(tx, p) for p in planned)


async def _seed_and_follow(url: str, rollouts: int, *, follow: bool = True) -> int:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        planned = generate_run(rollouts, seed=21)
        if rollouts:
            await store.execute(lambda tx: _append(tx, planned))
        await catch_up_views(store)
        return await HealthFollower(store).catch_up() if follow else 0
    finally:
        await store.close()


async def _on(url: str, fn: Any, *, write: bool = False) -> Any:
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.begin() if write else engine.connect() as conn:
            return await conn.run_sync(fn)
    finally:
        await engine.dispose()


def _rows(conn: Connection) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(select(health_findings).order_by("rollout_id"))]


def _names(conn: Connection) -> set[str]:
    found = inspect(conn)
    return set(found.get_table_names()) | set(found.get_view_names())


@pytest.mark.health_check_errors(RAISING_CHECK)
def test_verify_checks_the_current_rows(database_url: str) -> None:
    checked = asyncio.run(_seed_and_follow(database_url, 30))
    assert checked > 0
    result = invoke(database_url, "verify")
    assert result.exit_code == 0, result.output
    assert f"ok   health findings: {checked} current rows" in result.stdout

    def tamper(conn: Connection) -> None:
        conn.execute(
            text(
                "UPDATE health_findings SET model_calls = model_calls + 7 WHERE rollout_id = "
                "(SELECT MIN(rollout_id) FROM health_findings)"
            )
        )

    asyncio.run(_on(database_url, tamper, write=True))
    failed = invoke(database_url, "verify")
    assert failed.exit_code != 0
    assert "FAIL health_findings" in failed.stdout and "model_calls" in failed.stdout


def test_verify_counts_rows_behind_as_checked_on_read(database_url: str) -> None:
    asyncio.run(_seed_and_follow(database_url, 12, follow=False))
    result = invoke(database_url, "verify")
    assert result.exit_code == 0, result.output
    assert "ok   health findings: 0 current rows" in result.stdout
    behind = re.search(r"\((\d+) behind, checked on read", result.stdout)
    assert behind is not None and int(behind.group(1)) > 0, result.stdout


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_0009_down_and_up_with_data(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    assert await _seed_and_follow(url, 25) > 0
    before = await _on(url, _rows)
    assert before and await _on(url, _names) >= VIEWS

    await migrate.downgrade(url, BEFORE)
    names = await _on(url, _names)
    assert "health_findings" not in names and not VIEWS & names

    await migrate.upgrade(url)
    assert await _on(url, _rows) == []
    assert await _seed_and_follow(url, 0) == len(before)
    assert await _on(url, _rows) == before


@pytest.mark.health_check_errors(RAISING_CHECK)
def test_rows_of_deleted_rollouts_are_counted_then_removed(database_url: str) -> None:
    asyncio.run(_seed_and_follow(database_url, 10))

    def orphan(conn: Connection) -> None:
        row = conn.execute(select(health_findings).limit(1)).mappings().one()
        conn.execute(health_findings.insert().values({**row, "rollout_id": "gone-0"}))

    asyncio.run(_on(database_url, orphan, write=True))
    result = invoke(database_url, "verify")
    assert result.exit_code == 0, result.output
    assert "1 of deleted rollouts" in result.stdout
    asyncio.run(_seed_and_follow(database_url, 0))  # a follower resuming removes it
    ids = {row[0] for row in asyncio.run(_on(database_url, _rows))}
    assert ids and "gone-0" not in ids
    assert "0 of deleted rollouts" in invoke(database_url, "verify").stdout
