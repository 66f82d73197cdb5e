"""A writer batch writes its event rows in one multi-row INSERT; nothing a command sees changes.

The rows wait in memory until the batch ends, so these check what could tell: an
idempotency key repeated within a batch, a command that reads the events table after earlier
commands appended, a command rolled back after it wrote earlier commands' rows, and a batch
whose INSERT the database refuses (like a failed commit it fails every command of the batch,
none of them happened, and the writer goes on; no command is run twice).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from sqlalchemy import text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.metrics import LedgerMetrics
from ledger.log.engines import sqlite_path
from ledger.log.errors import StorageUnavailable
from ledger.log.events import EventType
from ledger.log.records import NewEvent
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.log.verify import verify_chain, verify_projections


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


NOTES = [EventType("test.note", Note), EventType("test.refused", Note)]


@pytest.fixture
async def notes(database_url: str) -> AsyncIterator[LedgerStore]:
    store = LedgerStore(
        database_url, default_catalogue(NOTES), write_side_projectors(), metrics=LedgerMetrics()
    )
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def in_one_batch(
    store: LedgerStore, commands: list[Callable[[WriteTransaction], Any]]
) -> list[Any]:
    """Run ``commands`` in one writer batch: queued in one turn of the event loop, before the
    writer task resumes, they are taken together (checked with the writer's batch count)."""
    metrics = store.writer._metrics
    assert isinstance(metrics, LedgerMetrics)
    before = batches(metrics)
    results = await asyncio.gather(
        *(store.execute(command) for command in commands), return_exceptions=True
    )
    assert batches(metrics) == before + 1, "the commands did not run in one batch"
    return results


def batches(metrics: LedgerMetrics) -> float:
    """Batches run, committed or failed."""
    registry = metrics.registry
    committed = registry.get_sample_value("ledger_writer_batch_size_count") or 0.0
    return committed + (registry.get_sample_value("ledger_writer_failed_batches_total") or 0.0)


def note(
    text_: str, key: str | None = None, kind: str = "test.note"
) -> Callable[[WriteTransaction], Any]:
    def command(tx: WriteTransaction) -> Any:
        return tx.append(kind, {"text": text_}, rollout_id="r", idempotency_key=key)

    return command


async def assert_sound(store: LedgerStore, count: int) -> None:
    async with store.read() as conn:
        chain = await verify_chain(conn)
        projections = await verify_projections(conn, store.catalogue, store.projectors)
    assert chain.ok and chain.events == count, chain.problem
    assert projections.ok, projections.differences


async def test_an_idempotency_key_repeated_in_one_batch_returns_the_first_event(
    notes: LedgerStore,
) -> None:
    first, again, other = await in_one_batch(
        notes, [note("a", key="k"), note("a", key="k"), note("b", key="k2")]
    )
    assert first.created and not again.created
    assert again.event.seq == first.event.seq == 1
    assert again.event.payload == {"text": "a"} and again.event.hash == first.event.hash
    assert other.created and other.event.seq == 2
    await assert_sound(notes, 2)


async def test_a_command_reading_the_events_table_sees_the_batch_so_far(
    notes: LedgerStore,
) -> None:
    def count_events(tx: WriteTransaction) -> int:
        tx.write_events()
        return int(tx.conn.execute(text("SELECT COUNT(*) FROM events")).scalar_one())

    results = await in_one_batch(notes, [note("a"), note("b"), count_events, note("c")])
    assert results[2] == 2  # the two appended before it in the batch
    await assert_sound(notes, 3)


async def test_a_rolled_back_command_keeps_the_rows_of_the_commands_before_it(
    notes: LedgerStore,
) -> None:
    class Boom(Exception):
        pass

    def writes_then_fails(tx: WriteTransaction) -> None:
        tx.append("test.note", {"text": "doomed"}, rollout_id="doomed")
        tx.write_events()  # writes the earlier commands' rows too, inside this savepoint
        raise Boom

    results = await in_one_batch(notes, [note("a"), writes_then_fails, note("b")])
    assert isinstance(results[1], Boom)
    assert [(event.seq, event.payload) for event in await notes.events()] == [
        (1, {"text": "a"}),
        (2, {"text": "b"}),
    ]
    assert await notes.rollout("doomed") is None
    await assert_sound(notes, 2)


async def test_a_refused_batch_insert_fails_the_whole_batch_and_runs_no_command_twice(
    notes: LedgerStore, database_url: str
) -> None:
    if not notes.is_sqlite:
        pytest.skip("the refusing trigger is written in SQLite's dialect")
    with closing(sqlite3.connect(sqlite_path(database_url))) as conn:
        conn.execute(
            "CREATE TRIGGER refuse_test_events BEFORE INSERT ON events "
            "WHEN NEW.kind = 'test.refused' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        conn.commit()
    runs: list[str] = []

    def counted(command: Callable[[WriteTransaction], Any], name: str) -> Any:
        def run(tx: WriteTransaction) -> Any:
            runs.append(name)
            return command(tx)

        return run

    results = await in_one_batch(
        notes,
        [
            counted(note("a"), "a"),
            counted(note("x", kind="test.refused"), "x"),
            counted(note("b"), "b"),
        ],
    )
    assert runs == ["a", "x", "b"]
    assert all(isinstance(r, StorageUnavailable) and "refused" in r.message for r in results)
    assert await notes.events() == []
    assert await notes.rollout("r") is None  # the batch's projection rows went with it
    # The writer goes on, and what the batch remembered is gone with it.
    again = await notes.append(NewEvent("test.note", {"text": "b"}, "r"))
    assert again.event.seq == 1 and again.event.generation == 0
    await assert_sound(notes, 1)
