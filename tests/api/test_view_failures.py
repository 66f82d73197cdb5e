"""A view that cannot apply an event (log/view_failures.py): the events before it are applied,
the event and its error are told by ``/readyz``, ``/metrics``, ``projection_status`` and the
503 of a rollout read (at once, not after the wait's bound), and once the event can be applied
the views go on and the failure is gone. The event is damaged in the database, as a disk or a
hand could do, with the log's refusal of updates lifted for it."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

import httpx
from sqlalchemy import text

from ledger.app.config import Settings
from ledger.log.engines import create_async_db_engine
from tests.api.support import ledger_of, running_app
from tests.support.exchanges import chat_exchange


async def _set_payload(url: str, seq: int, payload: str) -> None:
    """Rewrite a stored payload past the log's refusal of updates. On SQLite the write lock is
    taken first (``BEGIN IMMEDIATE``, waiting out the running app's own writes): a deferred
    transaction met "database is locked" on a loaded machine."""
    if url.startswith("sqlite"):
        database = sqlite3.connect(url.split("///", 1)[1], timeout=30, isolation_level=None)
        try:
            database.execute("BEGIN IMMEDIATE")
            database.execute("DROP TRIGGER IF EXISTS events_refuse_update")
            database.execute("UPDATE events SET payload = ? WHERE seq = ?", (payload, seq))
            database.execute("COMMIT")
        finally:
            database.close()
        return
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
            await conn.execute(
                text("UPDATE events SET payload = :p WHERE seq = :seq"), {"p": payload, "seq": seq}
            )
            await conn.execute(text("ALTER TABLE events ENABLE TRIGGER USER"))
    finally:
        await engine.dispose()


_SELECT_PAYLOAD = text("SELECT payload FROM events WHERE seq = :s")


async def _payload(url: str, seq: int) -> str:
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            found = await conn.execute(_SELECT_PAYLOAD, {"s": seq})
            return str(found.scalar_one())
    finally:
        await engine.dispose()


async def _readyz_until(http: httpx.AsyncClient, done: Any, within_s: float = 20.0) -> Any:
    deadline = time.monotonic() + within_s
    while True:
        body = (await http.get("/readyz")).json()
        if done(body["views"]):
            return body["views"]
        assert time.monotonic() < deadline, body
        await asyncio.sleep(0.05)  # poll: the follower retries once a second


async def _status_rows(url: str) -> dict[str, dict[str, Any]]:
    """``projection_status``'s rows of the views, as ``ledger sql`` or ``sqlite3`` read them."""
    sql = (
        "SELECT projection, projected_seq, failing_seq, failure, failures "
        "FROM projection_status WHERE follows_log"
    )
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return {row.projection: row._asdict() for row in await conn.execute(text(sql))}
    finally:
        await engine.dispose()


async def test_a_view_that_cannot_apply_an_event_says_which_and_goes_on_once_it_can(
    settings: Settings, database_url: str
) -> None:
    async with running_app(settings) as (app, http):
        ledger = ledger_of(app)
        assert ledger.projector is not None
        await ledger.projector.stop()
        seqs = {}
        for rollout_id in ("before", "damaged", "after"):
            posted = await http.post(
                f"/v1/rollouts/{rollout_id}/model-calls",
                json=chat_exchange(model_call_id=f"{rollout_id}-c"),
            )
            assert posted.status_code == 201, posted.text
            seqs[rollout_id] = posted.json()["seq"]
        bad = seqs["damaged"]
        original = await _payload(database_url, bad)
        # Cut short: not JSON, so no view can read the capture.
        await _set_payload(database_url, bad, original[: len(original) // 2])
        await ledger.projector.start()

        views = await _readyz_until(http, lambda v: v["failing"] is not None)
        # The page failed whole; its events were then applied one at a time, so the one
        # before the damaged event is in the views and the failure names the damaged one.
        assert views["projected_seq"] == bad - 1
        failing = views["failing"]
        assert failing["seq"] == bad and failing["failures"] >= 1
        assert 0 < len(failing["error"]) <= 500
        assert (await http.get("/readyz")).status_code == 200  # appends go on

        metrics = (await http.get("/metrics")).text
        assert f"ledger_views_failing_seq {float(bad)}" in metrics
        rows = await _status_rows(database_url)
        assert rows and {row["failing_seq"] for row in rows.values()} == {bad}
        assert all(row["failure"] == failing["error"] for row in rows.values())

        assert (await http.get("/v1/rollouts/before/record")).status_code == 200
        for rollout_id in ("damaged", "after"):
            started = time.monotonic()
            answer = await http.get(f"/v1/rollouts/{rollout_id}/record")
            waited = time.monotonic() - started
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "1"
            detail = answer.json()["detail"]
            assert f"a view cannot apply the event at seq {bad}" in detail, detail
            assert len(detail) < 1000
            # Answered at once: no wait brings the views past the event.
            assert waited < settings.views_wait_s

        # The event readable again (a restored backup, a fixed view): the views go on.
        await _set_payload(database_url, bad, original)
        views = await _readyz_until(http, lambda v: v["failing"] is None and not v["behind"])
        assert views["projected_seq"] == seqs["after"]
        rows = await _status_rows(database_url)
        assert {row["failing_seq"] for row in rows.values()} == {None}
        assert "ledger_views_failing_seq 0.0" in (await http.get("/metrics")).text
        for rollout_id in ("damaged", "after"):
            answer = await http.get(f"/v1/rollouts/{rollout_id}/record")
            assert answer.status_code == 200, answer.text
