"""Revision 0011 adds ``run_labels`` and the summary views; down and up again keep every
event and bring back the labels of every rollout's current generation (rebuilt from the
stored ``rollout.labelled`` events by the upgrade), and the views answer as before."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, inspect, select, text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.bootstrap import catch_up_views, upgrade_database
from ledger.areas.captures.service import CaptureService
from ledger.areas.lineage.service import LineageService
from ledger.areas.observations.service import ObservationService
from ledger.log import migrate
from ledger.log.projection_versions import projection_versions
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from tests.support.databases import run_on
from tests.support.exchanges import chat_exchange

BEFORE = "0010_projection_versions"
VIEWS = ("rollout_summary", "task_summary", "run_summary")


def _event_rows(conn: Connection) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(select(events).order_by(events.c.seq))]


def _labels(conn: Connection) -> list[tuple[Any, ...]]:
    query = "SELECT rollout_id, generation, run_label, labelled_seq FROM run_labels ORDER BY 1"
    return [tuple(row) for row in conn.execute(text(query))]


def _views(conn: Connection) -> set[str]:
    return set(inspect(conn).get_view_names()) & set(VIEWS)


def _run_summary(conn: Connection) -> dict[str | None, tuple[Any, ...]]:
    query = "SELECT run_label, rollouts, latest_attempts, resolved FROM run_summary"
    return {row[0]: tuple(row[1:]) for row in conn.execute(text(query))}


async def _write(url: str) -> None:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        captures, results = CaptureService(store), ObservationService(store)
        for rollout, run in (("r1", "run-a"), ("r1-a1", "run-a"), ("r2", "run-b"), ("r3", None)):
            await captures.append(rollout, chat_exchange(model_call_id="c1"), run=run)
            body = {"task_id": "t", "resolved": rollout != "r2"}
            await results.record_result(rollout, body, run=run)
        # r2's label ends with its generation; its id is reused under another run.
        await LineageService(store).delete(["r2"])
        await results.record_result("r2", {"task_id": "t"}, run="run-c")
        await catch_up_views(store)
    finally:
        await store.close()


def _runs_version(conn: Connection) -> int | None:
    query = select(projection_versions.c.version).where(projection_versions.c.projection == "runs")
    return conn.execute(query).scalar_one_or_none()


async def test_0011_down_and_up_with_labels(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    await _write(url)
    events_before = await run_on(url, _event_rows)
    labels_before = await run_on(url, _labels)
    assert [row[:3] for row in labels_before] == [
        ("r1", 0, "run-a"),
        ("r1-a1", 0, "run-a"),
        ("r2", 1, "run-c"),
    ]
    summary_before = await run_on(url, _run_summary)
    # r1 is superseded by its attempt r1-a1; r2's first generation is gone.
    assert summary_before == {"run-a": (2, 1, 1), "run-c": (1, 1, 0), None: (1, 1, 1)}

    await migrate.downgrade(url, BEFORE)
    assert await run_on(url, lambda conn: "run_labels" in inspect(conn).get_table_names()) is False
    assert await run_on(url, _views) == set()
    assert await run_on(url, _event_rows) == events_before

    await migrate.upgrade(url)
    assert await run_on(url, _views) == set(VIEWS)
    # The revision marks the projection instead of running its code; the upgrade rebuilds it.
    assert await run_on(url, _labels) == []
    assert await run_on(url, _runs_version) == 0
    report = await upgrade_database(url)
    # 0015's projection is new since 0010 too, and the log has captures for it.
    assert report is not None and report.stale == ["runs", "evidence"]
    assert await run_on(url, _runs_version) == 1
    assert await run_on(url, _labels) == labels_before
    assert await run_on(url, _run_summary) == summary_before
    assert await run_on(url, _event_rows) == events_before
    count = await run_on(
        url, lambda conn: conn.execute(select(func.count()).select_from(events)).scalar_one()
    )
    assert count == len(events_before)
