"""Migration 0004 down and up on both backends; the routes' tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import create_async_engine

from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.log import migrate
from tests.observations.support import EXAMPLE_OBSERVATIONS

# At head the view's tables are those of its first build, and their stable names SQL views over
# them (log/view_builds.py).
STABLE = {"observation_calls", "observation_records", "observation_tool_calls", "observation_gaps"}
TABLES = {f"{name}_b1" for name in STABLE}
VIEWS = {"rollout_perf", "rollout_tool_calls", "rollout_gaps", *STABLE}


async def names(url: str) -> tuple[set[str], set[str]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            tables = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
            views = await conn.run_sync(lambda sync: set(inspect(sync).get_view_names()))
        return tables, views
    finally:
        await engine.dispose()


async def test_migration_down_and_up(database_url: str) -> None:
    tables, views = await names(database_url)
    assert tables >= TABLES and views >= VIEWS
    await migrate.downgrade(database_url, "0003_lineage")
    tables, views = await names(database_url)
    assert not ((TABLES | STABLE) & tables) and not (VIEWS & views)
    assert "events" in tables
    await migrate.upgrade(database_url)
    tables, views = await names(database_url)
    assert tables >= TABLES and views >= VIEWS


@pytest.fixture
async def guarded(tmp_path: Path, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        control_token="control-secret",
        ingest_token="ingest-secret",
        read_token="read-secret",
    )
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http


async def test_writes_need_the_ingest_token_and_reads_the_read_token(
    guarded: httpx.AsyncClient,
) -> None:
    url = "/v1/rollouts/0-0/observations"
    refused = await guarded.post(url, json=EXAMPLE_OBSERVATIONS)
    assert refused.status_code == 401
    assert refused.json()["detail"] == "missing or invalid ingest bearer token"
    wrong = await guarded.post(
        url, json=EXAMPLE_OBSERVATIONS, headers={"Authorization": "Bearer read-secret"}
    )
    assert wrong.status_code == 401
    ok = await guarded.post(
        url, json=EXAMPLE_OBSERVATIONS, headers={"Authorization": "Bearer ingest-secret"}
    )
    assert ok.status_code == 201
    for path in ("/v1/rollouts/0-0/record", "/v1/rollouts/0-0/trajectory", "/v1/export"):
        assert (await guarded.get(path)).status_code == 401
        response = await guarded.get(path, headers={"Authorization": "Bearer read-secret"})
        assert response.status_code == 200, path
