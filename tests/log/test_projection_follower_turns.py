"""Two projection followers on one database take turns: each decodes a page before it takes the
write lock, and applies it only if the views are still where it read the page from; a page
another follower applied meanwhile is dropped and the next one read. Every event is applied
once, whichever follower applied it, and the views equal a rebuild (``ledger verify``)."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from ledger.app.areas import default_catalogue, default_projectors, views_follower
from ledger.areas.captures.service import CaptureService
from ledger.log.engines import create_async_db_engine
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from ledger.log.transaction import WriteTransaction
from ledger.log.verify import verify_projections
from tests.support.exchanges import chat_exchange

PAGE = 5


async def _capture(store: LedgerStore, rollouts: int, calls: int) -> None:
    service = CaptureService(store)
    for n in range(calls):
        for r in range(rollouts):
            await service.append(f"r{r}", chat_exchange(model_call_id=f"r{r}-c{n}"))


async def _verified(database_url: str, store: LedgerStore) -> None:
    engine = create_async_db_engine(database_url, read_only=True, null_pool=True)
    try:
        report = await verify_projections(engine, store.catalogue, default_projectors())
    finally:
        await engine.dispose()
    assert report.ok, report


async def test_a_page_applied_by_another_follower_meanwhile_is_dropped(
    store: LedgerStore, database_url: str
) -> None:
    await _capture(store, rollouts=2, calls=6)
    first = views_follower(store, page_events=PAGE)
    second = views_follower(store, page_events=PAGE)
    # The first reads and decodes a page; before it applies it, the second applies the same one.
    target, rows = await store.read_sync(first._read_page)
    decoded = first._decode_page(rows)
    assert await second.step() == PAGE

    def stale(tx: WriteTransaction) -> int | None:
        return first._apply_page(target, decoded, tx)

    assert await store.execute(stale) is None
    # The first goes on from where the views are now.
    assert await first.step() == PAGE
    progress = await first.progress()
    assert progress.projected == target.after + 2 * PAGE


async def test_two_followers_at_once_apply_every_event_once(
    store: LedgerStore, database_url: str
) -> None:
    await _capture(store, rollouts=3, calls=12)
    # Two stores, two writers: as two projector processes on one database.
    other = LedgerStore(database_url, default_catalogue(), [])
    await other.open()
    try:
        followers = [
            views_follower(store, page_events=PAGE),
            views_follower(other, page_events=PAGE),
        ]
        applied = await asyncio.gather(*(follower.catch_up() for follower in followers))
        progress = await followers[0].progress()
    finally:
        await other.close()
    assert progress.behind == 0
    # Each event once: the two followers' counts add up to the log, none applied twice.
    logged = await store.read_sync(
        lambda conn: conn.execute(select(func.count()).select_from(events)).scalar_one()
    )
    assert sum(applied) == logged > 0
    await _verified(database_url, store)
