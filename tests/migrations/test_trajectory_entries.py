"""Revision 0005 with records in the database: it marks the observations projection for
rebuild instead of running its code, and ``ledger db upgrade`` (``upgrade_database``) rebuilds
the projections from the log, so each stored call gets its trajectory entry, capture-only
records become templates, the database reads the same and passes ``ledger verify``. Its
downgrade gives back whole records."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select

from ledger.app.areas import default_catalogue, default_projectors, write_side_projectors
from ledger.app.bootstrap import catch_up_views, ensure_database_ready, upgrade_database
from ledger.areas.captures.service import CaptureService
from ledger.areas.observations.queries import read_record_text
from ledger.areas.observations.service import ObservationService
from ledger.areas.observations.tables import observation_calls, observation_records
from ledger.log import migrate
from ledger.log.engines import create_async_db_engine
from ledger.log.errors import ProjectionsStale
from ledger.log.store import LedgerStore
from ledger.log.verify import verify_projections
from tests.observations.support import EXAMPLE_RESULT
from tests.support.exchanges import chat_exchange, messages_exchange, responses_exchange


async def _entries(store: LedgerStore) -> list[tuple[Any, ...]]:
    async with store.read() as conn:
        query = select(
            observation_calls.c.rollout_id,
            observation_calls.c.call_index,
            observation_calls.c.trajectory_entry,
        ).order_by(observation_calls.c.rollout_id, observation_calls.c.call_index)
        return [tuple(row) for row in (await conn.execute(query)).all()]


async def _records(store: LedgerStore) -> dict[str, tuple[str | None, bool]]:
    """Each rollout's record as a read returns it, and whether it is stored as a template."""
    async with store.read() as conn:
        rows = (
            await conn.execute(
                select(observation_records.c.rollout_id, observation_records.c.assembled)
            )
        ).all()
        return {
            str(row.rollout_id): (await read_record_text(conn, row.rollout_id), row.assembled)
            for row in rows
        }


def _parsed(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [(*key, json.loads(entry)) for *key, entry in rows]


def _store(url: str) -> LedgerStore:
    return LedgerStore(url, default_catalogue(), write_side_projectors())


async def test_0005_keeps_every_record_as_it_reads(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    store = _store(url)
    await store.open()
    try:
        captures = CaptureService(store)
        for n, make in enumerate([chat_exchange, responses_exchange, messages_exchange] * 3):
            await captures.append(f"r{n % 4}", make(model_call_id=f"c{n}"))
        await ObservationService(store).record_result("r3", EXAMPLE_RESULT)  # a whole record
        await catch_up_views(store)
        derived = await _entries(store)
        records = await _records(store)
    finally:
        await store.close()
    assert len(derived) == 9 and all(entry is not None for *_, entry in derived)
    assert {rollout_id: assembled for rollout_id, (_, assembled) in records.items()} == {
        "r0": True,
        "r1": True,
        "r2": True,
        "r3": False,
    }

    await migrate.downgrade(url, "0004_observations")
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            query = select(observation_records.c.rollout_id, observation_records.c.record)
            whole = {str(row[0]): str(row[1]) for row in (await conn.execute(query)).all()}
    finally:
        await engine.dispose()
    assert whole == {rollout_id: text for rollout_id, (text, _) in records.items()}

    await migrate.upgrade(url)
    # At head, but the observations rows lack what the projection now derives: not servable.
    with pytest.raises(ProjectionsStale, match=r"observations.*ledger db upgrade"):
        await ensure_database_ready(url)
    rebuild = await upgrade_database(url)
    # 0015 (later) marks its new projection too: the log has captures for it.
    assert rebuild is not None and rebuild.stale == ["evidence", "observations"]
    assert rebuild.events == 10
    await ensure_database_ready(url)
    again = await upgrade_database(url)
    assert again is not None and again.stale == [] and again.events == 0

    store = _store(url)
    await store.open()
    try:
        # Rebuilt from the log, whose payloads are canonical JSON: the same values, with the
        # request's objects in sorted key order (decisions.md, "kernel" 3).
        assert _parsed(await _entries(store)) == _parsed(derived)
        rebuilt = await _records(store)
        assert {k: (json.loads(text or "null"), flag) for k, (text, flag) in rebuilt.items()} == {
            k: (json.loads(text or "null"), flag) for k, (text, flag) in records.items()
        }
        async with store.read() as conn:
            report = await verify_projections(
                conn, store.catalogue, default_projectors(check_templates=True)
            )
        assert report.ok, report.differences
    finally:
        await store.close()
