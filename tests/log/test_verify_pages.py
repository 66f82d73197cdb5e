"""``ledger verify`` reads the log in pages, each its own short transaction, and its cost is
linear in a rollout's length (the record's full rebuild runs once per rollout, not per event)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest
from sqlalchemy import event

import ledger.areas.observations.projection as observations_projection
from ledger.app.areas import default_catalogue, default_projectors, views_follower
from ledger.app.bootstrap import catch_up_views
from ledger.areas.captures.service import CaptureService
from ledger.log.engines import create_async_db_engine, is_sqlite_url, sqlite_path
from ledger.log.store import LedgerStore
from ledger.log.verify import verify_chain, verify_projections
from tests.log.record_builds import count_record_builds
from tests.support.exchanges import chat_exchange

PAGE = 10


class CheckedOut:
    """Counts the engine's connections in use (a transaction needs one)."""

    def __init__(self) -> None:
        self.now = 0
        self.at_progress: list[int] = []

    def attach(self, engine: Any) -> None:
        event.listen(engine.sync_engine, "checkout", self._out)
        event.listen(engine.sync_engine, "checkin", self._in)

    def _out(self, *_: Any) -> None:
        self.now += 1

    def _in(self, *_: Any) -> None:
        self.now -= 1


async def _capture(store: LedgerStore, count: int, rollout_id: str = "long") -> None:
    service = CaptureService(store)
    for n in range(count):
        await service.append(rollout_id, chat_exchange(model_call_id=f"{rollout_id}-{n}"))


async def test_verify_holds_no_transaction_between_pages_while_the_log_grows(
    store: LedgerStore, database_url: str
) -> None:
    await _capture(store, 35)
    # The views follow the log as a projector keeps them, while it grows.
    follower = views_follower(store)
    await follower.start()
    engine = create_async_db_engine(database_url, read_only=True, null_pool=True)
    checked_out = CheckedOut()
    checked_out.attach(engine)
    wal_checkpoints: list[tuple[int, int, int]] = []
    writes: list[asyncio.Task[None]] = []

    def between_pages(_: int) -> None:
        checked_out.at_progress.append(checked_out.now)
        if is_sqlite_url(database_url):
            # A reader holding an old snapshot makes a TRUNCATE checkpoint report busy (1):
            # the WAL could then only grow.
            # A writer holding its lock is waited for (busy_timeout): only a reader's old
            # snapshot may make the checkpoint busy, and a loaded machine slows writers.
            with sqlite3.connect(sqlite_path(database_url), timeout=30) as other:
                wal_checkpoints.append(other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
        if len(writes) < 3:
            writes.append(asyncio.create_task(_capture(store, 4, f"meanwhile-{len(writes)}")))

    try:
        chain = await verify_chain(engine, progress=between_pages, batch=PAGE)
        await asyncio.gather(*writes)
        report = await verify_projections(
            engine, store.catalogue, default_projectors(), progress=between_pages, batch=PAGE
        )
    finally:
        await engine.dispose()
        await follower.stop()
    assert chain.ok, chain.problem
    assert chain.events >= 35
    assert report.ok, report.differences
    # The projection check saw every event, including those written while it ran.
    assert report.events == await store.head_seq() >= 35 + 12
    assert len(checked_out.at_progress) >= 2 * (35 // PAGE)
    assert set(checked_out.at_progress) == {0}
    if is_sqlite_url(database_url):
        assert wal_checkpoints and all(busy == 0 for busy, _, _ in wal_checkpoints)


async def test_verify_rebuilds_a_long_rollouts_record_once(
    store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One capture per command: the writer flushed 60 times. The full rebuild of the record
    # (what made verify quadratic) must run once, on the final rows.
    await _capture(store, 60)
    await catch_up_views(store)
    full_rebuilds = count_record_builds(monkeypatch)
    async with store.read() as conn:
        report = await verify_projections(
            conn, default_catalogue(), default_projectors(check_templates=True), batch=PAGE
        )
    assert report.ok, report.differences
    assert full_rebuilds == ["long"]


async def test_verify_still_reports_a_template_that_does_not_give_the_full_record(
    store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _capture(store, 12)
    await catch_up_views(store)
    # A template that fills to something else than the full record (an assembler bug).
    monkeypatch.setattr(observations_projection, "fill", lambda template, pieces: template + " ")
    async with store.read() as conn:
        report = await verify_projections(
            conn, default_catalogue(), default_projectors(check_templates=True), batch=PAGE
        )
    assert not report.ok
    assert any(d.startswith("observation_records:") for d in report.differences)
