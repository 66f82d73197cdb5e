"""The append records a capture's position; the capture view derives its row behind it.

On both backends: an acknowledged capture has its position (what idempotency and the next
``call_index`` decide on) and no derived row until the view follows; then the view's rows are
what a rebuild from seq 0 gives, including positions a later clear or tombstone removed before
the view reached them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select

from ledger.app.areas import default_catalogue, default_projectors
from ledger.app.bootstrap import catch_up_views
from ledger.areas.captures.calls_view import CaptureCallsView
from ledger.areas.captures.service import CaptureService
from ledger.areas.captures.tables import capture_call_counts, capture_calls, capture_positions
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED
from ledger.log.store import LedgerStore
from ledger.log.verify import verify_projections
from ledger.log.view_checkpoints import projected_seq
from tests.support.exchanges import chat_exchange, failed_exchange


def _count(conn: Connection, table: Any) -> int:
    return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


async def test_the_append_records_the_position_and_the_view_derives_the_row(
    store: LedgerStore,
) -> None:
    captures = CaptureService(store)
    first = await captures.append("r1", chat_exchange(model_call_id="a", prompt_tokens=7))
    second = await captures.append("r1", failed_exchange(model_call_id="b"))
    assert (first.call_index, second.call_index) == (0, 1)
    positions = await store.read_sync(lambda conn: _count(conn, capture_positions))
    rows = await store.read_sync(lambda conn: _count(conn, capture_calls))
    assert (positions, rows) == (2, 0)
    # A repeat is decided on the position alone: the same call_index and seq, not created.
    again = await captures.append("r1", chat_exchange(model_call_id="a", prompt_tokens=7))
    assert (again.created, again.call_index, again.seq) == (False, 0, first.seq)

    await catch_up_views(store)

    def derived(conn: Connection) -> list[tuple[Any, ...]]:
        query = select(
            capture_calls.c.call_index,
            capture_calls.c.seq,
            capture_calls.c.model_call_id,
            capture_calls.c.tokens_in,
            capture_calls.c.status_code,
        ).order_by(capture_calls.c.call_index)
        return [tuple(row) for row in conn.execute(query)]

    assert await store.read_sync(derived) == [
        (0, first.seq, "a", 7, 200),
        (1, second.seq, "b", None, 503),
    ]
    view = (await captures.attachment("r1", payloads=False))["calls"]
    assert [call["model_call_id"] for call in view] == ["a", "b"]


async def test_a_position_removed_before_the_view_reached_it_is_skipped(
    store: LedgerStore,
) -> None:
    """Captures, a clear, more captures and a tombstone, all appended before the view follows:
    when it does, the positions of the earlier events are gone from the write side, and the
    view's rows and counts are still exactly a rebuild's."""
    captures = CaptureService(store)
    await captures.append("r1", chat_exchange(model_call_id="a"))
    await captures.append("r1", chat_exchange(model_call_id="b"))
    await captures.clear("r1")
    await captures.append("r1", chat_exchange(model_call_id="c"))
    await captures.append("r2", chat_exchange(model_call_id="a"))
    await store.append(NewEvent(ROLLOUT_DELETED, {"had_rows": True}, rollout_id="r2"))
    await captures.append("r2", chat_exchange(model_call_id="z"))

    await catch_up_views(store)

    def state(conn: Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]:
        rows = conn.execute(
            select(
                capture_calls.c.rollout_id,
                capture_calls.c.call_index,
                capture_calls.c.model_call_id,
            ).order_by(capture_calls.c.rollout_id, capture_calls.c.call_index)
        ).all()
        counts = conn.execute(
            select(
                capture_call_counts.c.rollout_id,
                capture_call_counts.c.generation,
                capture_call_counts.c.record_count,
                capture_call_counts.c.damaged_count,
            ).order_by(capture_call_counts.c.rollout_id)
        ).all()
        return (
            [tuple(r) for r in rows],
            [tuple(c) for c in counts],
            projected_seq(conn, [CaptureCallsView.name]),
        )

    rows, counts, reached = await store.read_sync(state)
    assert rows == [("r1", 0, "c"), ("r2", 0, "z")]
    assert counts == [("r1", 0, 1, 0), ("r2", 1, 1, 0)]
    assert reached == await store.head_seq()
    async with store.read() as conn:
        report = await verify_projections(conn, default_catalogue(), default_projectors())
    assert report.ok, report.differences
