"""`ledger serve --upgrade` on a database whose view is stale (a new release changed the view's
code): the upgrade replays nothing under the writer's lock, the server serves at once and its
projector process builds the views again from seq 0 beside the live ones, which answer reads
until the build is swapped in; captures appended meanwhile are acknowledged,
and once the views have caught up the database reads as the appends left it and passes `ledger
verify`. (That appends and the rebuild's pages interleave is shown in process by
tests/migrations/test_projection_versions.py, where a page is one event.)"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Connection, update

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.bootstrap import catch_up_views
from ledger.areas.captures.service import CaptureService
from ledger.log import migrate
from ledger.log.engines import create_async_db_engine
from ledger.log.projection_versions import MARKED_FOR_REBUILD, projection_versions
from ledger.log.store import LedgerStore
from tests.suites.cli import ledger_cli
from tests.support.exchanges import chat_exchange
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

ROLLOUTS = 6
CALLS_BEFORE = 40  # per rollout, written before the upgrade
CALLS_DURING = 5  # per rollout, appended while the views are rebuilt


async def _written_by_the_earlier_release(url: str) -> None:
    """A database with captures and current views, then the observations view marked stale,
    as a release whose observations code changed would find it."""
    await migrate.upgrade(url)
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        captures = CaptureService(store)
        for n in range(CALLS_BEFORE):
            items = [
                {"rollout_id": f"u{r}", "exchange": chat_exchange(model_call_id=f"u{r}-b{n}")}
                for r in range(ROLLOUTS)
            ]
            results = await captures.append_many(items)
            assert {result.status for result in results} == {201}
        await catch_up_views(store)
    finally:
        await store.close()

    def mark(conn: Connection) -> None:
        conn.execute(
            update(projection_versions)
            .where(projection_versions.c.projection == "observations")
            .values(version=MARKED_FOR_REBUILD)
        )

    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(mark)
    finally:
        await engine.dispose()


async def test_serve_upgrade_rebuilds_a_stale_view_while_appends_go_on(
    tmp_path: Path, database_url: str
) -> None:
    await _written_by_the_earlier_release(database_url)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = ServerProcess(
        data_dir=data_dir,
        database_url=database_url,
        argv=("ledger", "serve", "--upgrade"),
        env={"LEDGER_PROJECTOR": "process"},
    )
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text
            # Reads go on: the live views answer while the new build is filled (or, once it is
            # swapped in, the new one; the same record either way).
            record = await http.get("/v1/rollouts/u0/record")
            assert record.status_code == 200, record.text
            calls = record.json()["ng_model_call_capture"]["calls"]
            assert [c["model_call_id"] for c in calls] == [f"u0-b{n}" for n in range(CALLS_BEFORE)]
            for n in range(CALLS_DURING):
                for r in range(ROLLOUTS):
                    answer = await http.post(
                        f"/v1/rollouts/u{r}/model-calls",
                        json=chat_exchange(model_call_id=f"u{r}-during-{n}"),
                    )
                    assert answer.status_code == 201, answer.text
            deadline = time.monotonic() + 120
            while True:
                views = (await http.get("/readyz")).json()["views"]
                # Caught up: the build swapped in (the live views may be current before it is).
                if not views["behind"] and views["rebuilding_until"] is None:
                    break
                assert time.monotonic() < deadline, views
                await asyncio.sleep(0.05)  # poll
            # The rebuild has reached the head it started at: /readyz no longer tells of one.
            assert views["rebuilding_until"] is None, views
            for r in range(ROLLOUTS):
                record = await http.get(f"/v1/rollouts/u{r}/record")
                assert record.status_code == 200, record.text
                calls = record.json()["ng_model_call_capture"]["calls"]
                assert [c["model_call_id"] for c in calls] == [
                    *(f"u{r}-b{n}" for n in range(CALLS_BEFORE)),
                    *(f"u{r}-during-{n}" for n in range(CALLS_DURING)),
                ]
    finally:
        server.stop()
    logged = server.log_path.read_text()
    assert "stale projections: observations" in logged, logged
    assert "the views are built again from seq 0 beside the live ones" in logged, logged
    assert "write side" not in logged, logged
    verified = await asyncio.to_thread(ledger_cli, database_url, data_dir, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "ok   projections" in verified.stdout
