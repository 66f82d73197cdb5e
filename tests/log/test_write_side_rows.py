"""The write side's rows (``rollouts``, ``capture_state``, positions) are written when ``append``
or ``append_many`` returns, each rollout's row once per ``append_many``: the rows must come out
as per-event projection leaves them (``verify`` replays event by event), SQL reads inside a
command must see what it appended with no call to make first, and a rolled-back command must
leave nothing behind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.events import (
    CAPTURE_CLEARED,
    CAPTURE_MARKED_INCOMPLETE,
    CAPTURE_PENDING_ANNOUNCED,
    CAPTURE_PENDING_WITHDRAWN,
    MODEL_CALL_CAPTURED,
    MODEL_CALL_DAMAGED,
    ModelCallCaptured,
)
from ledger.areas.captures.queries import load_state, lookup_capture
from ledger.areas.captures.service import CaptureService
from ledger.areas.captures.tables import capture_positions, capture_state
from ledger.areas.lineage import queries as lineage
from ledger.log import migrate
from ledger.log.engines import create_sqlite_writer_engine
from ledger.log.errors import IdempotencyConflict
from ledger.log.records import NewEvent
from ledger.log.rollout_cache import RolloutCache
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.log.store import LedgerStore
from ledger.log.tables import rollouts
from ledger.log.transaction import WriteTransaction, read_head
from ledger.log.verify import verify_chain, verify_projections
from tests.support.databases import sqlite_url
from tests.support.exchanges import chat_exchange


def capture(tx: WriteTransaction, rollout_id: str, model_call_id: str) -> int:
    appended = tx.append(
        MODEL_CALL_CAPTURED,
        ModelCallCaptured.model_construct(
            model_call_id=model_call_id, exchange=chat_exchange(model_call_id=model_call_id)
        ),
        rollout_id=rollout_id,
    )
    return appended.event.seq


async def assert_rebuilds_identically(store: LedgerStore) -> None:
    async with store.read() as conn:
        chain = await verify_chain(conn)
        report = await verify_projections(conn, store.catalogue, store.projectors)
    assert chain.ok, chain.problem
    assert report.ok, report.differences


async def rows(store: LedgerStore) -> dict[str, list[dict[str, Any]]]:
    async with store.read() as conn:
        return {
            table.name: [
                dict(row._mapping)
                for row in await conn.execute(select(table).order_by(table.c.rollout_id))
            ]
            for table in (rollouts, capture_state, capture_positions)
        }


def captured(rollout_id: str, model_call_id: str) -> NewEvent:
    payload = ModelCallCaptured.model_construct(
        model_call_id=model_call_id, exchange=chat_exchange(model_call_id=model_call_id)
    )
    return NewEvent(MODEL_CALL_CAPTURED, payload, rollout_id)


def run_events(tx: WriteTransaction, new_events: list[NewEvent], *, together: bool) -> None:
    if together:
        tx.append_many(new_events)
    else:
        for new in new_events:
            tx.append(new.kind, new.payload, rollout_id=new.rollout_id)


@pytest.mark.parametrize("together", [False, True], ids=["append", "append_many"])
async def test_every_kind_of_event_in_one_command_leaves_the_per_event_rows(
    store: LedgerStore, together: bool
) -> None:
    first = [
        # r1: a new rollout with captures, a damaged line, pending calls and a marker; retired.
        captured("r1", "a"),
        NewEvent(MODEL_CALL_DAMAGED, {"raw_line": "{oops", "reason": "bad"}, "r1"),
        NewEvent(CAPTURE_PENDING_ANNOUNCED, {"model_call_id": "p"}, "r1"),
        NewEvent(CAPTURE_PENDING_ANNOUNCED, {"model_call_id": "q"}, "r1"),
        NewEvent(CAPTURE_PENDING_WITHDRAWN, {"model_call_id": "q"}, "r1"),
        captured("r1", "p"),  # settles the pending call p
        NewEvent(CAPTURE_MARKED_INCOMPLETE, {"reason": "x"}, "r1"),
        NewEvent(ROLLOUT_RETIRED, {"had_rows": False}, "r1"),
        # r2: captured, cleared and captured again, deleted, then a new generation.
        captured("r2", "a"),
        NewEvent(CAPTURE_CLEARED, {}, "r2"),
        captured("r2", "b"),
        NewEvent(ROLLOUT_DELETED, {"had_rows": False}, "r2"),
        captured("r2", "a"),
    ]
    await store.execute(lambda tx: run_events(tx, first, together=together))

    # A second command on rows that now exist (UPDATE, not INSERT), and a deleted rollout
    # whose tombstone is the command's only event for it.
    second = [
        captured("r2", "c"),
        NewEvent(ROLLOUT_DELETED, {"had_rows": False}, "r1"),
        captured("r3", "a"),
    ]
    await store.execute(lambda tx: run_events(tx, second, together=together))
    await assert_rebuilds_identically(store)

    stored = await rows(store)
    by_id = {row["rollout_id"]: row for row in stored["rollouts"]}
    assert (by_id["r1"]["generation"], by_id["r1"]["state"], by_id["r1"]["first_seq"]) == (
        1,
        "live",
        1,
    )
    assert (by_id["r2"]["generation"], by_id["r2"]["first_seq"], by_id["r2"]["last_seq"]) == (
        1,
        9,
        14,
    )
    states = {row["rollout_id"]: row for row in stored["capture_state"]}
    assert set(states) == {"r2", "r3"}  # r1's went with its tombstone
    assert (states["r2"]["generation"], states["r2"]["next_call_index"]) == (1, 2)
    assert states["r2"]["last_seq"] == 14


async def test_reads_inside_a_command_see_what_it_appended(store: LedgerStore) -> None:
    def command(tx: WriteTransaction) -> list[object]:
        seen: list[object] = []
        capture(tx, "r1", "a")
        last = capture(tx, "r1", "b")
        # The captures service's reads (marker commands, an append's lookup).
        state = load_state(tx.conn, "r1", 0)
        seen.append((state.next_call_index, state.has_evidence, state.last_seq == last))
        seen.append(lookup_capture(tx.conn, "r1", "c").next_call_index)
        # A raw read of the rollouts row, and the lineage commands' read of its state.
        row = tx.conn.execute(select(rollouts).where(rollouts.c.rollout_id == "r1")).one()
        seen.append((row.first_seq, row.last_seq == last))
        lineage.retire(tx, ["r1"])
        seen.append(lineage.record_row(tx, "r1", {"model_call_id": "m"}).outcome)
        # Appending after a read: the row is written again at the end of the command.
        capture(tx, "r1", "c")
        return seen

    seen = await store.execute(command)
    assert seen == [(2, True, True), 2, (1, True), "discarded"]
    await assert_rebuilds_identically(store)
    stored = await rows(store)
    assert (stored["capture_state"][0]["next_call_index"], len(stored["capture_positions"])) == (
        3,
        3,
    )


async def test_a_failed_command_leaves_no_rows_behind(store: LedgerStore) -> None:
    class Boom(Exception):
        pass

    def failing(tx: WriteTransaction) -> None:
        capture(tx, "gone", "a")
        # The rows are written at once: the savepoint undoes them.
        load_state(tx.conn, "gone", 0)
        capture(tx, "gone", "b")
        capture(tx, "kept", "x")  # pending for a rollout the next command touches too
        raise Boom

    def succeeding(model_call_id: str) -> Callable[[WriteTransaction], int]:
        return lambda tx: capture(tx, "kept", model_call_id)

    results = await asyncio.gather(
        store.execute(failing), store.execute(succeeding("a")), return_exceptions=True
    )
    assert isinstance(results[0], Boom)
    with pytest.raises(Boom):  # and with nothing else in its batch
        await store.execute(failing)
    await store.execute(succeeding("b"))
    await assert_rebuilds_identically(store)
    stored = await rows(store)
    assert [row["rollout_id"] for row in stored["rollouts"]] == ["kept"]
    assert [(row["rollout_id"], row["next_call_index"]) for row in stored["capture_state"]] == [
        ("kept", 2)
    ]


async def test_a_rollout_read_by_sql_after_the_cache_lost_it_is_current(
    tmp_path: Path,
) -> None:
    """``tx.rollout()`` falls back to SQL when the writer's cache has no row (it is bounded);
    that read must include the rows this command appended."""
    url = sqlite_url(tmp_path)
    await migrate.upgrade(url)
    engine = create_sqlite_writer_engine(url, synchronous="FULL", busy_timeout_ms=1000)
    try:
        with engine.connect() as conn, conn.begin():
            tx = WriteTransaction(
                conn,
                read_head(conn),
                default_catalogue(),
                write_side_projectors(),
                RolloutCache(max_entries=1),
            )
            first = capture(tx, "r1", "a")
            capture(tx, "r2", "a")  # the full cache empties itself: r1 is no longer in it
            tx.append(ROLLOUT_RETIRED, {"had_rows": False}, rollout_id="r2")
            state = tx.rollout("r1")
            assert state is not None
            assert (state.first_seq, state.last_seq, state.state) == (first, first, "live")
            tx.end_command()
    finally:
        engine.dispose()


@pytest.mark.parametrize("batched", [True, False])
async def test_captures_through_the_service_rebuild_identically(
    store: LedgerStore, batched: bool
) -> None:
    service = CaptureService(store)
    items = [
        {"rollout_id": f"r{n % 3}", "exchange": chat_exchange(model_call_id=f"m{n}")}
        for n in range(30)
    ]
    if batched:
        results = await service.append_many(items)
        assert [r.status for r in results] == [201] * 30
    else:
        for item in items:
            await service.append(str(item["rollout_id"]), item["exchange"])
    await service.mark_incomplete("r1")
    await assert_rebuilds_identically(store)
    states = {row["rollout_id"]: row for row in (await rows(store))["capture_state"]}
    assert [states[f"r{n}"]["next_call_index"] for n in range(3)] == [10, 10, 10]
    assert states["r1"]["incomplete"]


async def test_an_event_refused_part_way_leaves_the_events_before_it_projected(
    store: LedgerStore,
) -> None:
    """A command that catches a refusal from ``append_many`` goes on with the events before the
    refused one appended and projected, as with one ``append`` each."""

    def command(tx: WriteTransaction) -> str:
        tx.append(CAPTURE_MARKED_INCOMPLETE, {"reason": "x"}, rollout_id="r0", idempotency_key="k")
        try:
            tx.append_many(
                [
                    captured("r1", "a"),
                    captured("r1", "b"),
                    # The key of another event: refused, and nothing after it is appended.
                    NewEvent(CAPTURE_PENDING_ANNOUNCED, {"model_call_id": "p"}, "r1", "k"),
                    captured("r1", "c"),
                ]
            )
        except IdempotencyConflict as exc:
            state = load_state(tx.conn, "r1", 0)
            return f"{type(exc).__name__} {state.next_call_index} {tx.head.seq}"
        return "appended"

    assert await store.execute(command) == "IdempotencyConflict 2 3"
    await assert_rebuilds_identically(store)
    stored = await rows(store)
    assert [row["call_index"] for row in stored["capture_positions"]] == [0, 1]
