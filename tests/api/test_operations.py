"""/healthz, /readyz and /metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from ledger.app.config import Settings
from ledger.log import migrate
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_RETIRED
from tests.api.support import ledger_of, running_app


async def test_healthz(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_at_head(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ready",
        "revision": migrate.head_revision(),
        "views": {
            "projected_seq": 0,
            "head_seq": 0,
            "behind": 0,
            "failing": None,
            "rebuilding_until": None,
        },
    }


async def test_readyz_is_503_when_the_database_is_behind(
    empty_database_url: str, tmp_path: Path
) -> None:
    await migrate.upgrade(empty_database_url, "0001_events")
    settings = Settings(data_dir=tmp_path / "data", database_url=empty_database_url)
    async with running_app(settings) as (_app, http):
        response = await http.get("/readyz")
        await migrate.upgrade(empty_database_url)
        ready = await http.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert "0001_events" in body["detail"] and "not at head" in body["detail"]
    assert ready.status_code == 200


async def test_readyz_is_503_when_the_database_was_never_migrated(
    empty_database_url: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "data", database_url=empty_database_url)
    async with running_app(settings) as (_app, http):
        response = await http.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "detail": f"database is at revision <empty>, not at head {migrate.head_revision()}; "
        "run `ledger db upgrade`",
    }


async def test_readyz_is_503_when_the_database_is_unreachable(tmp_path: Path) -> None:
    # A parent directory that is a plain file: SQLite can never open the database there.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite+aiosqlite:///{blocker / 'ledger.db'}",
    )
    async with running_app(settings) as (_app, http):
        response = await http.get("/readyz")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert response.json()["detail"]


async def test_metrics_report_the_writer(settings: Settings) -> None:
    # The mirror and health followers write their own rows through the writer when they find
    # new events, which would add their commands to the figures below whenever they run first.
    quiet = settings.model_copy(update={"mirror_enabled": False, "health_findings_enabled": False})
    async with running_app(quiet) as (app, client):
        store = ledger_of(app).store
        # So does the views' follower (in-server here): stopped, so that only appends count.
        projector = ledger_of(app).projector
        assert projector is not None
        await projector.stop()
        await asyncio.gather(
            *(store.append(NewEvent(ROLLOUT_RETIRED, {}, f"r{n}")) for n in range(5))
        )
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in response.text.splitlines()
        if line and not line.startswith("#")
    }
    assert samples["ledger_events_appended_total"] == 5.0
    assert samples["ledger_writer_batch_size_sum"] == 5.0
    assert 1.0 <= samples["ledger_writer_batch_size_count"] <= 5.0
    assert (
        samples["ledger_writer_commit_seconds_count"] == samples["ledger_writer_batch_size_count"]
    )
    assert "ledger_writer_queue_depth" in samples
    assert samples["ledger_writer_failed_batches_total"] == 0.0
