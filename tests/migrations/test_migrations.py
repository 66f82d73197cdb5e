"""Migrations are tested like code: one head, base → head, schema == models, down and up, and
the event log untouched by an upgrade. The revision chain is walked, never listed by hand, so the
tests cover every revision other areas add later."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import Script, ScriptDirectory
from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, Text, cast, inspect, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.app.areas import default_catalogue, migrated_schema, view_projectors
from ledger.log import migrate
from ledger.log.engines import create_async_db_engine
from ledger.log.errors import DatabaseNotAtHead
from ledger.log.events import EventType
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.log.rollouts_projection import RolloutsProjector
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from ledger.log.verify import verify_chain
from tests.support.databases import run_on

FIRST_REVISION = "0001_events"


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


def script_directory() -> ScriptDirectory:
    return ScriptDirectory.from_config(migrate.alembic_config("sqlite://"))


def revisions_head_first() -> list[Script]:
    return list(script_directory().walk_revisions("base", "heads"))


def schema_differences(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    return list(compare_metadata(context, migrated_schema()))


def table_names(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def test_there_is_exactly_one_head() -> None:
    assert len(script_directory().get_heads()) == 1
    # The revision the code is written for (migrate.HEAD_REVISION) is the newest script's: a
    # new revision must move it, or the server would refuse to start on an upgraded database.
    assert script_directory().get_current_head() == migrate.head_revision()
    assert migrate.alembic_head() == migrate.head_revision()


def test_the_chain_is_linear_from_the_first_revision() -> None:
    revisions = revisions_head_first()
    assert revisions[-1].revision == FIRST_REVISION
    assert revisions[-1].down_revision is None
    for newer, older in itertools.pairwise(revisions):
        assert newer.down_revision == older.revision
    for revision in revisions:
        assert revision.revision[:4].isdigit(), f"revision ids are numbered: {revision.revision}"


async def test_base_to_head_on_an_empty_database(empty_database_url: str) -> None:
    assert await migrate.current_revision(empty_database_url) is None
    await migrate.upgrade(empty_database_url)
    assert await migrate.current_revision(empty_database_url) == migrate.head_revision()
    await migrate.ensure_at_head(empty_database_url)
    present = await run_on(empty_database_url, table_names)
    assert set(migrated_schema().tables) <= present
    # The views' stable names are SQL views over their first build's tables.
    views = await run_on(empty_database_url, lambda conn: set(inspect(conn).get_view_names()))
    assert {table.name for view in view_projectors() for table in view.tables} <= views


async def test_migrated_schema_equals_the_models(empty_database_url: str) -> None:
    await migrate.upgrade(empty_database_url)
    differences = await run_on(empty_database_url, schema_differences)
    assert differences == []


async def test_every_revision_goes_down_and_up_again(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    for revision in revisions_head_first():
        below = revision.down_revision
        assert below is None or isinstance(below, str), "the chain has no merge points"
        await migrate.downgrade(url, below or "base")
        assert await migrate.current_revision(url) == below
        await migrate.upgrade(url, revision.revision)
        assert await migrate.current_revision(url) == revision.revision
        # Step down for good and walk on to the next revision.
        await migrate.downgrade(url, below or "base")
    assert await migrate.current_revision(url) is None
    assert await run_on(url, table_names) <= {"alembic_version"}
    await migrate.upgrade(url)
    assert await migrate.current_revision(url) == migrate.head_revision()
    assert await run_on(url, schema_differences) == []


async def _stored_event_rows(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every column of every event: as the driver returns it, and as text from the database."""
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            typed = await _rows(conn, select(events).order_by(events.c.seq))
            as_text = await _rows(
                conn, select(*(cast(c, Text) for c in events.c)).order_by(events.c.seq)
            )
            return typed, as_text
    finally:
        await engine.dispose()


async def _rows(conn: AsyncConnection, query: Any) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in (await conn.execute(query)).all()]


async def test_events_are_byte_identical_across_an_upgrade(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url, FIRST_REVISION)
    # Only the projection that exists at this revision: later areas' tables are not there yet.
    store = LedgerStore(
        url, default_catalogue([EventType("test.note", Note)]), [RolloutsProjector()]
    )
    await store.open()
    try:
        for index in range(12):
            await store.append(
                NewEvent(
                    "test.note",
                    {"text": f'note {index} ünïcödé \u2603 "quoted" \\ {"x" * index}'},
                    rollout_id=f"r{index % 3}",
                    idempotency_key=f"key-{index}" if index % 2 else None,
                )
            )
        await store.append(NewEvent("test.note", {"text": "no rollout"}))
        await store.append(NewEvent(ROLLOUT_RETIRED, {"had_rows": True}, "r1"))
        await store.append(NewEvent(ROLLOUT_DELETED, {"had_rows": True}, "r2"))
        await store.append(NewEvent("test.note", {"text": "next generation"}, "r2"))
    finally:
        await store.close()
    before_typed, before_text = await _stored_event_rows(url)
    assert len(before_typed) == 16

    await migrate.upgrade(url)
    assert await migrate.current_revision(url) == migrate.head_revision()

    after_typed, after_text = await _stored_event_rows(url)
    assert after_typed == before_typed
    assert after_text == before_text
    for row in after_text:
        assert all(value is None or isinstance(value, str) for value in row)
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            report = await verify_chain(conn)
    finally:
        await engine.dispose()
    assert report.ok and report.events == 16


@pytest.mark.parametrize("revision", [r.revision for r in revisions_head_first()])
async def test_each_revision_is_reported_as_current(empty_database_url: str, revision: str) -> None:
    await migrate.upgrade(empty_database_url, revision)
    assert await migrate.current_revision(empty_database_url) == revision
    if revision != migrate.head_revision():
        with pytest.raises(DatabaseNotAtHead, match="not at head"):
            await migrate.ensure_at_head(empty_database_url)
