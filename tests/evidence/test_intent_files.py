"""Gym's ``<id>.tokens.intents`` files, written as its token store writes them (the bare id and
a newline, appended, before dispatch), read by the live follower and by ``import``: each id is
an intent, recorded once per call; a partial last line waits (follower); a line that is not an
id is counted; ``.tokens.lock``, ``.tokens.jsonl`` and ``.tokens.state.json`` are not read; a
clear of the capture file leaves the intents alone; a removed and re-created intents file
records only its new ids."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from ledger.areas.captures.follow_tables import capture_follow_files
from ledger.areas.captures.follower import CaptureDirFollower, FollowOptions
from ledger.areas.captures.importer import import_capture_dir
from ledger.areas.evidence import queries
from ledger.areas.evidence.events import MODEL_CALL_INTENT_RECORDED
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from tests.support.exchanges import chat_exchange

DEADLINE_S = 20.0


def gym_intent(directory: Path, rollout_id: str, model_call_id: str) -> None:
    """What Gym's token store appends before it dispatches a call."""
    with (directory / f"{rollout_id}.tokens.intents").open("ab") as handle:
        handle.write(model_call_id.encode("utf-8") + b"\n")


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def gym_token_store_files(directory: Path, rollout_id: str) -> None:
    """The token store's other files beside the intents: never read as intents."""
    (directory / f"{rollout_id}.tokens.lock").write_bytes(b"")
    (directory / f"{rollout_id}.tokens.jsonl").write_bytes(b'{"model_call_id": "not-an-intent"}\n')
    (directory / f"{rollout_id}.tokens.state.json").write_bytes(b'{"frozen": false}')


async def intents_of(store: LedgerStore, rollout_id: str) -> list[str]:
    evidence = await store.read_sync(
        lambda conn: queries.rollout_evidence(conn, rollout_id=rollout_id)
    )
    if evidence is None:
        return []
    return [call.model_call_id for call in evidence.calls if call.intent_seq is not None]


async def intent_events(store: LedgerStore) -> int:
    async with store.read() as conn:
        query = select(func.count()).select_from(events)
        query = query.where(events.c.kind == MODEL_CALL_INTENT_RECORDED)
        return int((await conn.execute(query)).scalar_one())


async def followed_names(store: LedgerStore) -> set[str]:
    async with store.read() as conn:
        rows = await conn.execute(select(capture_follow_files.c.file_name))
        return {row.file_name for row in rows}


async def eventually(check: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        last = await check()
        if last:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what} (last: {last!r})")
        await asyncio.sleep(0.02)  # poll


@pytest.fixture
async def follower(store: LedgerStore, tmp_path: Path) -> AsyncIterator[CaptureDirFollower]:
    directory = tmp_path / "captures"
    directory.mkdir()
    running = CaptureDirFollower(
        store, directory, options=FollowOptions(force_polling=True, poll_interval=0.05)
    )
    await running.start()
    await asyncio.wait_for(running.caught_up.wait(), DEADLINE_S)
    try:
        yield running
    finally:
        await running.stop()


async def test_the_follower_records_intents(
    store: LedgerStore, follower: CaptureDirFollower
) -> None:
    directory = follower.directory
    gym_token_store_files(directory, "r1")
    gym_intent(directory, "r1", "c1")
    gym_intent(directory, "r1", "c2")
    append(directory / "r1.tokens.intents", b"c3")  # being written: waits for its newline
    capture = directory / "r1.capture.jsonl"
    append(capture, serialize_capture_line(chat_exchange(model_call_id="c1")).encode() + b"\n")

    async def two_intents() -> bool:
        return await intents_of(store, "r1") == ["c1", "c2"]

    await eventually(two_intents, "c1 and c2 recorded as intents")
    append(directory / "r1.tokens.intents", b"\n\xff\xfe\n")  # c3 complete; then not an id

    async def three_intents() -> bool:
        return await intents_of(store, "r1") == ["c1", "c2", "c3"]

    await eventually(three_intents, "c3 recorded once its line is complete")
    assert follower.total.unreadable_intents == 1
    assert await followed_names(store) == {"r1.capture.jsonl", "r1.tokens.intents"}

    # Gym's pre-dispatch clear of the capture file: a clear; the intents stay as they are.
    capture.unlink()

    async def cleared() -> bool:
        return await followed_names(store) == {"r1.tokens.intents"}

    await eventually(cleared, "the capture file's checkpoint forgotten by the clear")
    assert follower.total.clears == 1

    # Gym drops the rollout's token files, and a new dispatch writes them again.
    (directory / "r1.tokens.intents").unlink()
    await eventually(lambda: _no_names(store), "the intents file's checkpoint forgotten")
    gym_intent(directory, "r1", "c2")
    gym_intent(directory, "r1", "c4")

    async def four_intents() -> bool:
        return await intents_of(store, "r1") == ["c1", "c2", "c3", "c4"]

    await eventually(four_intents, "c4 recorded from the new file")
    assert await intent_events(store) == 4  # c2 was not recorded again


async def _no_names(store: LedgerStore) -> bool:
    return await followed_names(store) == set()


async def test_import_records_intents_once(store: LedgerStore, tmp_path: Path) -> None:
    directory = tmp_path / "captures"
    directory.mkdir()
    gym_token_store_files(directory, "r1")
    gym_intent(directory, "r1", "c1")
    append(directory / "r1.tokens.intents", b"\n  \nbad id\n")
    append(directory / "r1.tokens.intents", b"c2")  # a run cut mid-line: Gym's reader takes it
    gym_intent(directory, "r2", "d1")
    summary = await import_capture_dir(store, directory)
    assert (summary.intents, summary.unreadable_intents) == (3, 1)
    assert summary.files == 2
    assert await intents_of(store, "r1") == ["c1", "c2"]
    assert await intents_of(store, "r2") == ["d1"]
    again = await import_capture_dir(store, directory)
    assert again.intents == 0
    assert await intent_events(store) == 3
