"""Revision 0008 adds the follower's checkpoints; down and up again keep every event, and a
follower started on the re-upgraded database (its checkpoints gone) adds nothing: each line it
reads again is already stored."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import Connection, func, inspect, select

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.follow_tables import capture_follow_files
from ledger.areas.captures.follower import CaptureDirFollower
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from tests.support.databases import run_on
from tests.support.exchanges import chat_exchange

BEFORE = "0007_viewer_indexes"


async def _follow_once(url: str, directory: Path) -> CaptureDirFollower:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        follower = CaptureDirFollower(store, directory)
        await follower.start()
        await asyncio.wait_for(follower.caught_up.wait(), 30)
        await follower.stop()
        return follower
    finally:
        await store.close()


def _event_count(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(events)).scalar_one())


def _has_table(conn: Connection) -> bool:
    return "capture_follow_files" in inspect(conn).get_table_names()


def _checkpoints(conn: Connection) -> int:
    query = select(func.count()).select_from(capture_follow_files)
    return int(conn.execute(query).scalar_one())


async def test_0008_down_and_up_with_checkpoints(empty_database_url: str, tmp_path: Path) -> None:
    url = empty_database_url
    directory = tmp_path / "captures"
    directory.mkdir()
    for rollout in range(3):
        lines = [serialize_capture_line(chat_exchange(model_call_id=f"c{n}")) for n in range(4)]
        (directory / f"{rollout}-0.capture.jsonl").write_text("\n".join(lines) + "\n")
    (directory / "2-0.capture.incomplete").touch()
    await migrate.upgrade(url)
    first = await _follow_once(url, directory)
    assert first.catch_up.captured == 12 and first.catch_up.markers == 1
    events_before = await run_on(url, _event_count)
    assert await run_on(url, _checkpoints) == 4

    await migrate.downgrade(url, BEFORE)
    assert await run_on(url, _has_table) is False
    assert await run_on(url, _event_count) == events_before

    await migrate.upgrade(url)
    assert await run_on(url, _has_table) is True
    assert await run_on(url, _checkpoints) == 0
    again = await _follow_once(url, directory)
    assert again.catch_up.captured == 0 and again.catch_up.already_present == 12
    assert await run_on(url, _event_count) == events_before
    assert await run_on(url, _checkpoints) == 4
