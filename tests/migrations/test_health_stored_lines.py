"""Revision 0014 adds ``health_findings.verdict_line`` and ``.figures``. Down keeps the rows
(every earlier column is still computed); up empties the table, and the follower computes the
same rows again, the new columns included, and the summary takes its quick path over them."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Connection, func, inspect, select, text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.bootstrap import catch_up_views
from ledger.areas.health.follower import HealthFollower
from ledger.areas.health.selection import Selection
from ledger.areas.health.summary_query import summarise_quickly
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from ledger.log.transaction import WriteTransaction
from tests.support.databases import run_on
from tests.support.health_append import append_posts
from tests.support.health_run import RAISING_CHECK, generate_run

BEFORE = "0013_records_key_seq_index"


def _rows(conn: Connection) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(text("SELECT * FROM health_findings ORDER BY 1"))]


def _columns(conn: Connection) -> set[str]:
    return {column["name"] for column in inspect(conn).get_columns("health_findings")}


def _event_rows(conn: Connection) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(select(events).order_by(events.c.seq))]


async def _caught_up(url: str) -> int:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        return await HealthFollower(store).catch_up()
        await catch_up_views(store)
    finally:
        await store.close()


async def _quick_answer(url: str) -> bool:
    store = LedgerStore(url, default_catalogue(), [])
    try:
        quick = await store.read_sync(
            lambda conn: summarise_quickly(conn, Selection(attempts="all"), (), ())
        )
        return quick is not None
        await catch_up_views(store)
    finally:
        await store.close()


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_0014_down_and_up_with_findings(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    planned = generate_run(40, seed=3)
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:

        def command(tx: WriteTransaction) -> int:
            return sum(append_posts(tx, p) for p in planned)

        await store.execute(command)
        await catch_up_views(store)
    finally:
        await store.close()
    assert await _caught_up(url) == len(planned)
    rows_before = await run_on(url, _rows)
    events_before = await run_on(url, _event_rows)
    assert all(row[-1] is not None for row in rows_before)  # figures
    assert await _quick_answer(url)

    await migrate.downgrade(url, BEFORE)
    assert {"verdict_line", "figures"}.isdisjoint(await run_on(url, _columns))
    assert await run_on(url, _rows) == [row[:-2] for row in rows_before]

    await migrate.upgrade(url)
    assert {"verdict_line", "figures"} <= await run_on(url, _columns)
    count = await run_on(
        url,
        lambda conn: conn.execute(text("SELECT count(*) FROM health_findings")).scalar_one(),
    )
    assert count == 0
    assert await _caught_up(url) == len(planned)
    assert await run_on(url, _rows) == rows_before
    assert await _quick_answer(url)
    assert await run_on(url, _event_rows) == events_before
    total = await run_on(
        url, lambda conn: conn.execute(select(func.count()).select_from(events)).scalar_one()
    )
    assert total == len(events_before)
