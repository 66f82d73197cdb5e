"""The storage contract, written once and run against every backend (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel, ConfigDict
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.log.engines import create_async_db_engine
from ledger.log.errors import IdempotencyConflict, InvalidPayload, UnknownEventKind
from ledger.log.events import EventType
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.log.verify import verify_chain, verify_projections


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


NOTE = EventType("test.note", Note)


@pytest.fixture
async def notes_store(database_url: str) -> AsyncIterator[LedgerStore]:
    opened = LedgerStore(database_url, default_catalogue([NOTE]), write_side_projectors())
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def test_append_and_read_back_by_seq_and_by_rollout(notes_store: LedgerStore) -> None:
    for index in range(6):
        await notes_store.append(
            NewEvent("test.note", {"text": f"n{index}"}, rollout_id=f"r{index % 2}")
        )
    everything = await notes_store.events(after=0, limit=100)
    assert [e.seq for e in everything] == [1, 2, 3, 4, 5, 6]
    assert [e.payload for e in everything][:2] == [{"text": "n0"}, {"text": "n1"}]
    page = await notes_store.events(after=2, limit=2)
    assert [e.seq for e in page] == [3, 4]
    r1 = await notes_store.events(after=0, limit=100, rollout_id="r1")
    assert [e.payload["text"] for e in r1 if e.payload] == ["n1", "n3", "n5"]
    state = await notes_store.rollout("r1")
    assert state is not None
    assert (state.first_seq, state.last_seq, state.state, state.generation) == (2, 6, "live", 0)


async def test_idempotency_key_same_payload_returns_original(notes_store: LedgerStore) -> None:
    first = await notes_store.append(NewEvent("test.note", {"text": "a"}, "r1", "key-1"))
    again = await notes_store.append(NewEvent("test.note", {"text": "a"}, "r1", "key-1"))
    assert first.created and not again.created
    assert again.event.seq == first.event.seq
    assert [e.seq for e in await notes_store.events()] == [1]


async def test_idempotency_key_different_payload_conflicts(notes_store: LedgerStore) -> None:
    await notes_store.append(NewEvent("test.note", {"text": "a"}, "r1", "key-1"))
    with pytest.raises(IdempotencyConflict, match="key-1"):
        await notes_store.append(NewEvent("test.note", {"text": "b"}, "r1", "key-1"))
    assert len(await notes_store.events()) == 1


async def test_unknown_kind_and_bad_payload_fail_only_their_command(
    notes_store: LedgerStore,
) -> None:
    results = await asyncio.gather(
        notes_store.append(NewEvent("test.note", {"text": "ok-1"}, "r1")),
        notes_store.append(NewEvent("no.such.kind", {}, "r1")),
        notes_store.append(NewEvent("test.note", {"text": 3}, "r1")),
        notes_store.append(NewEvent("test.note", {"text": "ok-2"}, "r1")),
        return_exceptions=True,
    )
    assert isinstance(results[1], UnknownEventKind)
    assert isinstance(results[2], InvalidPayload)
    stored = await notes_store.events()
    assert [e.payload for e in stored] == [{"text": "ok-1"}, {"text": "ok-2"}]
    assert [e.seq for e in stored] == [1, 2]


async def test_gapless_order_under_50_concurrent_appenders(notes_store: LedgerStore) -> None:
    async def appender(worker: int) -> list[int]:
        seqs = []
        for n in range(10):
            appended = await notes_store.append(
                NewEvent("test.note", {"text": f"{worker}-{n}"}, f"w{worker}")
            )
            seqs.append(appended.event.seq)
        return seqs

    per_worker = await asyncio.gather(*(appender(w) for w in range(50)))
    all_seqs = sorted(s for seqs in per_worker for s in seqs)
    assert all_seqs == list(range(1, 501))
    for seqs in per_worker:
        assert seqs == sorted(seqs)
    async with notes_store.read() as conn:
        report = await verify_chain(conn)
    assert report.ok and report.events == 500


async def test_multi_event_command_is_all_or_nothing(notes_store: LedgerStore) -> None:
    def two_then_fail(tx: WriteTransaction) -> None:
        tx.append("test.note", {"text": "first"}, rollout_id="r1")
        tx.append("test.note", {"text": "second"}, rollout_id="r1")
        raise RuntimeError("boom after two appends")

    def two(tx: WriteTransaction) -> int:
        tx.append("test.note", {"text": "third"}, rollout_id="r1")
        return tx.append("test.note", {"text": "fourth"}, rollout_id="r1").event.seq

    failing, succeeding = await asyncio.gather(
        notes_store.execute(two_then_fail), notes_store.execute(two), return_exceptions=True
    )
    assert isinstance(failing, RuntimeError)
    assert succeeding == 2
    stored = await notes_store.events()
    assert [e.payload for e in stored] == [{"text": "third"}, {"text": "fourth"}]
    async with notes_store.read() as conn:
        assert (await verify_chain(conn)).ok


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET kind = 'x' WHERE seq = 1",
        "UPDATE events SET payload = NULL WHERE seq = 1",
        "DELETE FROM events WHERE seq = 1",
    ],
)
async def test_triggers_refuse_raw_update_and_delete(
    notes_store: LedgerStore, database_url: str, statement: str
) -> None:
    await notes_store.append(NewEvent("test.note", {"text": "keep me"}, "r1"))
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        with pytest.raises(DBAPIError, match="events are"):
            async with engine.begin() as conn:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()
    stored = await notes_store.events()
    assert stored[0].payload == {"text": "keep me"}


async def test_redacting_a_deleted_generation_is_the_one_permitted_update(
    notes_store: LedgerStore, database_url: str
) -> None:
    await notes_store.append(NewEvent("test.note", {"text": "old generation"}, "r1"))
    await notes_store.append(NewEvent(ROLLOUT_DELETED, {"had_rows": True}, "r1"))
    await notes_store.append(NewEvent("test.note", {"text": "new generation"}, "r1"))
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE events SET payload = NULL WHERE seq = 1"))
        with pytest.raises(DBAPIError, match="immutable"):
            async with engine.begin() as conn:
                await conn.execute(text("UPDATE events SET payload = NULL WHERE seq = 3"))
    finally:
        await engine.dispose()
    stored = await notes_store.events()
    assert [e.payload for e in stored] == [None, {"had_rows": True}, {"text": "new generation"}]
    async with notes_store.read() as conn:
        assert (await verify_chain(conn)).ok


async def test_tampering_is_detected_at_the_first_bad_seq(
    notes_store: LedgerStore, database_url: str
) -> None:
    for index in range(5):
        await notes_store.append(NewEvent("test.note", {"text": f"n{index}"}, "r1"))
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                await conn.execute(text("DROP TRIGGER events_refuse_update"))
            else:
                await conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
            await conn.execute(
                text("UPDATE events SET payload = :p WHERE seq = 3"), {"p": '{"text":"forged"}'}
            )
    finally:
        await engine.dispose()
    async with notes_store.read() as conn:
        report = await verify_chain(conn)
    assert not report.ok
    assert report.first_bad_seq == 3
    assert report.problem is not None and "payload" in report.problem


async def test_generations_retire_then_delete_then_reuse(notes_store: LedgerStore) -> None:
    await notes_store.append(NewEvent("test.note", {"text": "g0"}, "r1"))
    await notes_store.append(NewEvent(ROLLOUT_RETIRED, {"had_rows": True}, "r1"))
    retired = await notes_store.rollout("r1")
    assert retired is not None and (retired.state, retired.generation) == ("retired", 0)
    await notes_store.append(NewEvent(ROLLOUT_DELETED, {"had_rows": True}, "r1"))
    reused = await notes_store.append(NewEvent("test.note", {"text": "g1"}, "r1"))
    assert reused.event.generation == 1
    state = await notes_store.rollout("r1")
    assert state is not None and (state.state, state.generation) == ("live", 1)
    generations = [(e.kind, e.generation) for e in await notes_store.events(rollout_id="r1")]
    assert generations == [
        ("test.note", 0),
        (ROLLOUT_RETIRED, 0),
        (ROLLOUT_DELETED, 0),
        ("test.note", 1),
    ]


async def test_projections_rebuild_identically(notes_store: LedgerStore) -> None:
    for index in range(20):
        await notes_store.append(NewEvent("test.note", {"text": str(index)}, f"r{index % 4}"))
    await notes_store.append(NewEvent(ROLLOUT_RETIRED, {}, "r1"))
    await notes_store.append(NewEvent(ROLLOUT_DELETED, {}, "r2"))
    async with notes_store.read() as conn:
        report = await verify_projections(conn, notes_store.catalogue, notes_store.projectors)
    assert report.ok, report.differences


async def test_a_damaged_projection_is_reported(
    notes_store: LedgerStore, database_url: str
) -> None:
    await notes_store.append(NewEvent("test.note", {"text": "x"}, "r1"))
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE rollouts SET state = 'retired'"))
    finally:
        await engine.dispose()
    async with notes_store.read() as conn:
        report = await verify_projections(conn, notes_store.catalogue, notes_store.projectors)
    assert not report.ok
    assert "rollouts" in report.differences[0]
