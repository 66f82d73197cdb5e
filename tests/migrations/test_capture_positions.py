"""Revision 0018 with captures in the database, on both backends: down to the shape of the code
before it (``capture_calls`` kept with the append, the counts in ``capture_state``) and up
again moves the rows without running projection code, so the database is servable at once (no
stale projection, nothing to rebuild), reads the same and passes ``ledger verify``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from ledger.app.areas import default_catalogue, default_projectors, write_side_projectors
from ledger.app.bootstrap import catch_up_views, ensure_database_ready, upgrade_database
from ledger.areas.captures.importer import import_capture_dir
from ledger.areas.captures.service import CaptureService
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log import migrate
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED
from ledger.log.store import LedgerStore
from ledger.log.verify import verify_projections
from tests.support.databases import run_on
from tests.support.exchanges import chat_exchange, failed_exchange, messages_exchange

BEFORE = "0017_view_checkpoints"


def _store(url: str) -> LedgerStore:
    return LedgerStore(url, default_catalogue(), write_side_projectors())


async def _reads(captures: CaptureService) -> dict[str, Any]:
    return {
        rollout_id: await captures.attachment(rollout_id, payloads=True)
        for rollout_id in ("r0", "r1", "r2", "imported", "marker-only", "pending-only")
    }


def _old_counts(conn: Connection) -> list[tuple[Any, ...]]:
    query = "SELECT rollout_id, record_count, damaged_count FROM capture_state ORDER BY rollout_id"
    return [tuple(row) for row in conn.execute(text(query))]


async def test_0018_down_and_up_with_captures(empty_database_url: str, tmp_path: Any) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    await upgrade_database(url)  # records the projections' versions, as `ledger db upgrade`
    lines = [serialize_capture_line(chat_exchange(model_call_id="i0")), "not json", "[1]"]
    (tmp_path / "imported.capture.jsonl").write_text("\n".join(lines) + "\n")
    store = _store(url)
    await store.open()
    try:
        captures = CaptureService(store)
        for n, make in enumerate([chat_exchange, failed_exchange, messages_exchange] * 2):
            await captures.append(f"r{n % 3}", make(model_call_id=f"c{n}"))
        await captures.clear("r1")
        await captures.append("r1", chat_exchange(model_call_id="after-clear"))
        await store.append(NewEvent(ROLLOUT_DELETED, {"had_rows": True}, rollout_id="r2"))
        await import_capture_dir(store, tmp_path)  # one record, two damaged lines
        await captures.mark_incomplete("marker-only")
        await captures.announce_pending("pending-only", "in-flight")
        await catch_up_views(store)
        before = await _reads(captures)
    finally:
        await store.close()

    await migrate.downgrade(url, BEFORE)
    assert await run_on(url, _old_counts) == [
        ("imported", 1, 2),
        ("marker-only", 0, 0),
        ("pending-only", 0, 0),
        ("r0", 2, 0),
        ("r1", 1, 0),
    ]

    await migrate.upgrade(url)
    await ensure_database_ready(url)  # servable as it is: nothing stale
    rebuild = await upgrade_database(url)
    assert rebuild is not None and rebuild.stale == []
    store = _store(url)
    await store.open()
    try:
        assert await _reads(CaptureService(store)) == before
        async with store.read() as conn:
            report = await verify_projections(conn, store.catalogue, default_projectors())
        assert report.ok, report.differences
    finally:
        await store.close()
