"""Revision 0015 adds ``evidence_calls`` and the ``call_evidence`` view; down and up again keep
every event, and the upgrade marks the projection so ``ledger db upgrade`` rebuilds the same
rows from the stored rows, intents and captures."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, inspect, select, text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.bootstrap import catch_up_views, upgrade_database
from ledger.areas.captures.service import CaptureService
from ledger.areas.evidence.service import record_intents
from ledger.areas.lineage.service import LineageService
from ledger.gym.lineage import CommittedRow
from ledger.log import migrate
from ledger.log.projection_versions import projection_versions
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from tests.lineage.rows import committed_row
from tests.support.databases import run_on
from tests.support.exchanges import chat_exchange

BEFORE = "0014_health_stored_lines"


def _event_rows(conn: Connection) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(select(events).order_by(events.c.seq))]


def _evidence(conn: Connection) -> list[tuple[Any, ...]]:
    query = (
        "SELECT rollout_id, generation, model_call_id, has_row, has_intent, has_capture "
        "FROM call_evidence ORDER BY 1, 3"
    )
    return [
        tuple(int(v) if isinstance(v, bool) else v for v in row)
        for row in conn.execute(text(query))
    ]


def _version(conn: Connection) -> int | None:
    query = select(projection_versions.c.version).where(
        projection_versions.c.projection == "evidence"
    )
    return conn.execute(query).scalar_one_or_none()


async def _write(url: str) -> None:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        await LineageService(store).record(
            "r1", CommittedRow.model_validate(committed_row("r1", "c1"))
        )
        await record_intents(store, "r1", ["c1", "c2"])
        await CaptureService(store).append("r1", chat_exchange(model_call_id="c1"))
        await CaptureService(store).append("r2", chat_exchange(model_call_id="x"))
        await catch_up_views(store)
    finally:
        await store.close()


async def test_0015_down_and_up_with_evidence(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    assert await run_on(url, _version) == 1  # an empty log: the empty table is the projection
    await _write(url)
    events_before = await run_on(url, _event_rows)
    evidence_before = await run_on(url, _evidence)
    assert evidence_before == [
        ("r1", 0, "c1", 1, 1, 1),
        ("r1", 0, "c2", 0, 1, 0),
        ("r2", 0, "x", 0, 0, 1),
    ]

    await migrate.downgrade(url, BEFORE)
    names = await run_on(url, lambda conn: set(inspect(conn).get_table_names()))
    assert "evidence_calls" not in names
    views = await run_on(url, lambda conn: set(inspect(conn).get_view_names()))
    assert "call_evidence" not in views
    assert await run_on(url, _event_rows) == events_before

    await migrate.upgrade(url)
    assert await run_on(url, _evidence) == []
    assert await run_on(url, _version) == 0
    report = await upgrade_database(url)
    assert report is not None and report.stale == ["evidence"]
    assert await run_on(url, _version) == 1
    assert await run_on(url, _evidence) == evidence_before
    assert await run_on(url, _event_rows) == events_before
