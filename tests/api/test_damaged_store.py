"""A database that reports damage while the server runs (issue 31 §1): appends stop with a
clear 503, /readyz fails, and nothing answers with a traceback or a 500."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import httpx

from ledger.app.config import Settings
from ledger.app.http.app import create_app
from tests.support.templates import copy_sqlite_template


def _damage_table(database: Path, table: str) -> None:
    """Random bytes over the table's root page, as a failing disk would leave it."""
    with sqlite3.connect(database) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,))
        page = root.fetchone()[0]
    with database.open("r+b") as handle:
        handle.seek((page - 1) * page_size)
        handle.write(random.Random(31).randbytes(page_size))


async def test_a_damaged_file_stops_appends_with_a_503(
    tmp_path: Path, sqlite_template: Path
) -> None:
    url = copy_sqlite_template(sqlite_template, tmp_path)
    _damage_table(Path(url.split("///", 1)[1]), "events")
    settings = Settings(data_dir=tmp_path / "data", database_url=url, control_token="c")
    app = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as client,
    ):
        row = {"failure_reason": "worker_capture_failed", "model_call_id": "c1"}
        first = await client.post("/v1/rollouts/r1/ledger/rows", json=row)
        assert first.status_code == 503, first.text
        assert "the database is damaged (database disk image is malformed)" in first.text
        # From now on the writer takes nothing: the file must not take more writes.
        second = await client.post("/v1/rollouts/r2/ledger/rows", json=row)
        assert second.status_code == 503
        assert "appends are stopped" in second.json()["detail"]
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert "damaged" in ready.json()["detail"]
        read = await client.get("/v1/events", params={"after": 0})
        assert read.status_code == 503
        assert "restored from a backup" in read.json()["detail"]
