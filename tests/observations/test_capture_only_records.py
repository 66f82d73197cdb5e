"""Capture-only records kept as templates read back as the full rebuild, byte for byte.

Two stores take the same commands: one with the default projections (a capture-only record is
stored as a template filled with per-call pieces on read: store/record_pieces.py), and a
reference that also rebuilds every record in full and keeps a template only where it gives the
same record (``check_templates=True``, what ``ledger verify`` uses). After every command the
stored rows (templates, perf columns, gaps) and what a read returns must be identical.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from ledger.app.areas import (
    default_catalogue,
    default_projectors,
    views_follower,
    write_side_projectors,
)
from ledger.app.bootstrap import catch_up_views
from ledger.areas.captures.events import MODEL_CALL_DAMAGED, ModelCallDamaged
from ledger.areas.captures.service import CaptureService
from ledger.areas.observations.capture_only import CaptureOnlyAssembler, trajectory_entry
from ledger.areas.observations.queries import read_record_text
from ledger.areas.observations.record_pieces import CallPiece, CallTotals, fill
from ledger.areas.observations.service import ObservationService
from ledger.areas.observations.tables import (
    observation_calls,
    observation_gaps,
    observation_records,
)
from ledger.gym.model_calls import AGGREGATE_FIELDS, aggregate_model_call_values
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.log.verify import verify_projections
from tests.observations.support import EXAMPLE_OBSERVATIONS, EXAMPLE_RESULT
from tests.support.exchanges import (
    chat_exchange,
    failed_exchange,
    messages_exchange,
    responses_exchange,
)


class Pair:
    """The same commands on an assembling store and on a full-rebuild store (the reference),
    whose views follow the log after every command."""

    def __init__(self, assembling: LedgerStore, full: LedgerStore) -> None:
        self.stores = (assembling, full)

    async def each(self, action: Callable[[LedgerStore], Awaitable[Any]]) -> None:
        for store in self.stores:
            await action(store)
        assembling, full = self.stores
        await catch_up_views(assembling)
        await views_follower(full, check_templates=True).catch_up()

    async def capture(self, rollout_id: str, exchange: dict[str, Any]) -> None:
        await self.each(lambda store: CaptureService(store).append(rollout_id, exchange))

    async def rows(self, store: LedgerStore) -> dict[str, list[tuple[Any, ...]]]:
        async with store.read() as conn:
            return {
                table.name: [
                    tuple(row)
                    for row in (
                        await conn.execute(select(table).order_by(*table.primary_key.columns))
                    ).all()
                ]
                for table in (observation_records, observation_gaps, observation_calls)
            }

    async def assert_same(self) -> None:
        """The same rows and records, JSON compared as values: the views take the payloads
        from the log, whose bytes have sorted keys, where the reference applied the request as
        it arrived (docs/decisions.md, "follow-the-log")."""
        assembling, full = self.stores
        assert _values(await self.rows(assembling)) == _values(await self.rows(full))
        for rollout_id in await self.rollouts(full):
            assert _json(await self.read(assembling, rollout_id)) == _json(
                await self.read(full, rollout_id)
            )

    async def rollouts(self, store: LedgerStore) -> list[str]:
        async with store.read() as conn:
            query = select(observation_records.c.rollout_id)
            return [str(row[0]) for row in (await conn.execute(query)).all()]

    async def read(self, store: LedgerStore, rollout_id: str) -> str | None:
        async with store.read() as conn:
            return await read_record_text(conn, rollout_id)

    async def templates(self) -> dict[str, bool]:
        """Whether each record of the assembling store is stored as a template."""
        async with self.stores[0].read() as conn:
            query = select(observation_records.c.rollout_id, observation_records.c.assembled)
            return {str(row[0]): bool(row[1]) for row in (await conn.execute(query)).all()}


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        return json.loads(value)
    return value


def _values(rows: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    return {name: [tuple(_json(v) for v in row) for row in found] for name, found in rows.items()}


@pytest.fixture
async def pair(database_url: str, tmp_path: Path) -> AsyncIterator[Pair]:
    # The full-rebuild store is always a scratch SQLite file: it is the reference.
    reference_url = f"sqlite+aiosqlite:///{tmp_path / 'reference.db'}"
    await migrate.upgrade(reference_url)
    assembling = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    full = LedgerStore(reference_url, default_catalogue(), write_side_projectors())
    await assembling.open()
    await full.open()
    try:
        yield Pair(assembling, full)
    finally:
        await assembling.close()
        await full.close()


def damaged(text: str) -> Callable[[WriteTransaction], None]:
    def command(tx: WriteTransaction) -> None:
        tx.append(
            MODEL_CALL_DAMAGED, ModelCallDamaged(raw_line=text, reason="not JSON"), rollout_id="r"
        )

    return command


async def test_single_captures_of_every_dialect_equal_the_full_rebuild(pair: Pair) -> None:
    exchanges = [
        chat_exchange(model_call_id="c0"),
        responses_exchange(model_call_id="c1"),
        messages_exchange(model_call_id="c2"),
        failed_exchange(model_call_id="c3"),
        # Ints where floats are usual, nulls where numbers are usual, non-ASCII text.
        {**chat_exchange(model_call_id="c4", text="héllo ☃"), "latency_ms": 7, "started_at": 1},
        {**chat_exchange(model_call_id="c5"), "latency_ms": None, "response": None},
        {**responses_exchange(model_call_id="c6"), "request_raw": "raw", "request": None},
    ]
    for exchange in exchanges:
        await pair.capture("r", exchange)
        await pair.assert_same()
    assert await pair.templates() == {"r": True}


async def test_markers_damage_and_clears_equal_the_full_rebuild(pair: Pair) -> None:
    await pair.each(lambda store: CaptureService(store).announce_pending("r", "later"))
    await pair.assert_same()
    assert await pair.templates() == {"r": False}  # no call yet: a whole record
    await pair.capture("r", chat_exchange(model_call_id="a"))
    await pair.assert_same()
    await pair.each(lambda store: store.execute(damaged("{not json")))
    await pair.assert_same()
    await pair.capture("r", messages_exchange(model_call_id="b"))
    await pair.each(lambda store: CaptureService(store).mark_incomplete("r", "disk full"))
    await pair.assert_same()
    await pair.capture("r", chat_exchange(model_call_id="later"))  # settles the pending call
    await pair.assert_same()
    await pair.each(lambda store: CaptureService(store).clear("r"))
    await pair.assert_same()
    await pair.capture("r", responses_exchange(model_call_id="a"))  # an id again after a clear
    await pair.assert_same()
    assert await pair.templates() == {"r": True}


async def test_batches_and_a_later_bundle_and_result_equal_the_full_rebuild(pair: Pair) -> None:
    items = [
        {"rollout_id": f"r{n % 3}", "exchange": chat_exchange(model_call_id=f"b{n}")}
        for n in range(12)
    ]
    await pair.each(lambda store: CaptureService(store).append_many(items))
    await pair.assert_same()
    # The bundle and the result end the capture-only phase: later captures rebuild in full.
    await pair.each(
        lambda store: ObservationService(store).record_observations("r0", EXAMPLE_OBSERVATIONS)
    )
    await pair.capture("r0", chat_exchange(model_call_id="after-bundle"))
    await pair.each(lambda store: ObservationService(store).record_result("r1", EXAMPLE_RESULT))
    await pair.capture("r1", chat_exchange(model_call_id="after-result"))
    await pair.assert_same()
    assert await pair.templates() == {"r0": False, "r1": False, "r2": True}


async def test_verify_rebuilds_in_full_and_agrees(pair: Pair) -> None:
    assembling, _ = pair.stores
    for n in range(5):
        await pair.capture("v", chat_exchange(model_call_id=f"v{n}"))
    async with assembling.read() as conn:
        report = await verify_projections(
            conn, assembling.catalogue, default_projectors(check_templates=True)
        )
    assert report.ok, report.differences


def totals(*figures: dict[str, int | float | None], missing: int = 0) -> CallTotals:
    result = CallTotals()
    for n, call in enumerate(figures):
        result = result.add({**dict.fromkeys(AGGREGATE_FIELDS), **call}, has_entry=n >= missing)
    return result


def test_running_totals_are_the_aggregate_of_the_calls_in_order() -> None:
    calls: list[dict[str, int | float | None]] = [
        {"tokens_in": 3, "latency_total_ms": 0.1},
        {"tokens_in": None, "latency_total_ms": 0.2},
        {"tokens_in": 4, "tokens_out": 7, "latency_total_ms": 0.30000000000000004},
    ]
    figures = [{**dict.fromkeys(AGGREGATE_FIELDS), **call} for call in calls]
    kept = totals(*calls)
    expected = aggregate_model_call_values(figures)
    assert {**(kept.sums or {}), "num_calls": kept.count} == expected
    assert list(expected) == [*AGGREGATE_FIELDS, "num_calls"]  # the same key order
    assert CallTotals.load(kept.dump()) == kept and CallTotals.load(None) == CallTotals()


def test_a_template_is_filled_with_the_entries_in_order() -> None:
    assembler = CaptureOnlyAssembler()
    assembled = assembler.assemble("r", totals({}, {}), [])
    assert assembled is not None and assembled.num_calls == 2
    pieces = [CallPiece('{"capture":1}', '{"trajectory":2}'), CallPiece('{"c":3}', '{"t":4}')]
    text = fill(assembled.template, pieces)
    assert '"calls":[{"capture":1},{"c":3}]' in text
    assert '"model_calls":[{"trajectory":2},{"t":4}]' in text
    assert "ledger:" not in text


def test_the_assembler_declines_what_a_template_cannot_give() -> None:
    assembler = CaptureOnlyAssembler()
    # No calls: the full rebuild is cheap and adds model_calls_unavailable itself.
    assert assembler.assemble("r", CallTotals(), []) is None
    # A call without a valid trajectory entry: the full rebuild decides.
    assert assembler.assemble("r", totals({}, {}, missing=1), []) is None
    with pytest.raises(ValueError, match="without a trajectory entry"):
        fill("{}", [CallPiece("{}", None)])


def test_a_trajectory_entry_is_none_when_the_call_cannot_make_one() -> None:
    assert trajectory_entry({"model_call_id": "x", "started_at": "not a time"}) is None


def test_kept_shapes_give_the_same_templates_as_new_ones() -> None:
    pieces = totals({"tokens_in": 3})
    gaps = [{"code": "model_call_capture_incomplete"}]
    cases = [("r1", []), ("r2", gaps), ("r1", gaps), ("r1", []), ("r2", [])]
    keeping_one = CaptureOnlyAssembler(shapes=1)
    keeping_many = CaptureOnlyAssembler()
    for rollout_id, case_gaps in cases * 2:
        fresh = CaptureOnlyAssembler().assemble(rollout_id, pieces, case_gaps)
        assert fresh is not None
        for assembler in (keeping_one, keeping_many):
            kept = assembler.assemble(rollout_id, pieces, case_gaps)
            assert kept is not None and kept.template == fresh.template
            assert '"tokens_in":3' in kept.template
