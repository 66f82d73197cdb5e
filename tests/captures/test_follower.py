"""The live capture-dir follower: new complete lines become events, a partial line waits, Gym's
pre-dispatch clear becomes a clear, attempts are ids of their own, markers are followed, damaged
lines count as the one-shot import counts them, and a restart resumes from the checkpoint."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from ledger.app.bootstrap import catch_up_views
from ledger.areas.captures.follow_tables import capture_follow_files
from ledger.areas.captures.follower import CaptureDirFollower, FollowOptions
from ledger.areas.captures.service import CaptureService
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from tests.support.exchanges import chat_exchange, responses_exchange

DEADLINE_S = 20.0


def line(exchange: dict[str, Any]) -> bytes:
    return serialize_capture_line(exchange).encode() + b"\n"


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


async def eventually(check: Callable[[], Any], what: str) -> None:
    """Poll an async check until it returns true, or fail naming what never happened."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        last = await check()
        if last:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what} (last: {last!r})")
        await asyncio.sleep(0.02)  # poll


async def call_ids(store: LedgerStore, rollout_id: str) -> list[str]:
    view = await attachment(store, rollout_id)
    return [call["model_call_id"] for call in view["calls"]]


async def attachment(store: LedgerStore, rollout_id: str) -> dict[str, Any]:
    await catch_up_views(store)  # the capture view follows the appends
    return await CaptureService(store).attachment(rollout_id, payloads=False)


async def count_kind(store: LedgerStore, kind: str) -> int:
    async with store.read() as conn:
        query = select(func.count()).select_from(events).where(events.c.kind == kind)
        return int((await conn.execute(query)).scalar_one())


@pytest.fixture(params=["inotify", "polling"])
def options(request: pytest.FixtureRequest) -> FollowOptions:
    return FollowOptions(force_polling=request.param == "polling", poll_interval=0.05)


@pytest.fixture
async def capture_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "captures"
    directory.mkdir()
    return directory


@pytest.fixture
async def follower(
    store: LedgerStore, capture_dir: Path, options: FollowOptions
) -> AsyncIterator[CaptureDirFollower]:
    running = CaptureDirFollower(store, capture_dir, options=options)
    await running.start()
    await asyncio.wait_for(running.caught_up.wait(), DEADLINE_S)
    try:
        yield running
    finally:
        await running.stop()


async def test_new_lines_are_ingested_and_a_partial_line_waits(
    store: LedgerStore, capture_dir: Path, follower: CaptureDirFollower
) -> None:
    path = capture_dir / "7-0.capture.jsonl"
    first, second, third = (chat_exchange(model_call_id=f"c{n}") for n in range(3))
    whole = line(third)
    append(path, line(first) + line(second) + whole[:25])

    async def two() -> bool:
        return await call_ids(store, "7-0") == ["c0", "c1"]

    await eventually(two, "the two complete lines ingested")

    async def only_the_partial_line_behind() -> bool:
        # The follower moves its position after the commit that made the rows visible.
        return follower.lag()[1] == len(whole[:25])

    await eventually(only_the_partial_line_behind, "the partial line is the lag")
    append(path, whole[25:])

    async def three() -> bool:
        return await call_ids(store, "7-0") == ["c0", "c1", "c2"]

    await eventually(three, "the completed line ingested")
    assert await count_kind(store, "model_call.captured") == 3
    assert follower.mode == ("polling" if follower.options.force_polling else "inotify")


async def test_pre_dispatch_clear_and_attempts(
    store: LedgerStore, capture_dir: Path, follower: CaptureDirFollower
) -> None:
    path = capture_dir / "3-1.capture.jsonl"
    append(
        path,
        line(chat_exchange(model_call_id="old-1")) + line(chat_exchange(model_call_id="old-2")),
    )
    append(capture_dir / "3-1.capture.incomplete", b"")

    async def old() -> bool:
        view = await attachment(store, "3-1")
        return [c["model_call_id"] for c in view["calls"]] == ["old-1", "old-2"] and view.get(
            "gaps"
        ) == [{"code": "model_call_capture_incomplete"}]

    await eventually(old, "the first attempt's lines and marker")
    # Gym's clear: both files unlinked; the retry writes under the -a1 id, and the same id
    # is dispatched again later (a new file).
    path.unlink()
    (capture_dir / "3-1.capture.incomplete").unlink()
    append(capture_dir / "3-1-a1.capture.jsonl", line(responses_exchange(model_call_id="try-1")))

    async def cleared() -> bool:
        view = await attachment(store, "3-1")
        return view["calls"] == [] and await call_ids(store, "3-1-a1") == ["try-1"]

    await eventually(cleared, "the clear and the attempt's own id")
    append(path, line(chat_exchange(model_call_id="new-1")))

    async def recreated() -> bool:
        view = await attachment(store, "3-1")
        return [c["model_call_id"] for c in view["calls"]] == ["new-1"] and "gaps" not in view

    await eventually(recreated, "the recreated file read from its start")
    assert await count_kind(store, "capture.cleared") == 1
    calls = (await attachment(store, "3-1"))["calls"]
    assert [c["call_index"] for c in calls] == [0]


async def test_a_rewritten_file_on_the_same_inode_is_a_new_file(
    store: LedgerStore, capture_dir: Path, follower: CaptureDirFollower
) -> None:
    path = capture_dir / "9-0.capture.jsonl"
    append(path, line(chat_exchange(model_call_id="a")))

    async def first() -> bool:
        return await call_ids(store, "9-0") == ["a"]

    await eventually(first, "the first line")
    inode = path.stat().st_ino
    # Same name, same inode, longer content that starts differently: only the head hash shows
    # it is not the file the checkpoint describes.
    with path.open("r+b") as handle:
        handle.write(
            line(chat_exchange(model_call_id="b")) + line(chat_exchange(model_call_id="c"))
        )
    assert path.stat().st_ino == inode

    async def replaced() -> bool:
        return await call_ids(store, "9-0") == ["b", "c"]

    await eventually(replaced, "the rewritten file read from its start")


async def test_damaged_lines_count_as_the_import_counts_them(
    store: LedgerStore, capture_dir: Path, follower: CaptureDirFollower
) -> None:
    path = capture_dir / "5-0.capture.jsonl"
    append(path, line(chat_exchange(model_call_id="ok-1")) + b"{not json\n\n[1, 2]\n")
    append(path, line(chat_exchange(model_call_id="ok-2")))

    async def done() -> bool:
        view = await attachment(store, "5-0")
        return [c["model_call_id"] for c in view["calls"]] == ["ok-1", "ok-2"]

    await eventually(done, "both records")
    view = await attachment(store, "5-0")
    assert view["gaps"] == [{"code": "model_call_capture_records_unreadable", "detail": "count=2"}]
    # Blank lines consume no position, damaged ones do (Gym's tolerant read).
    assert [c["call_index"] for c in view["calls"]] == [0, 3]


async def test_a_restart_resumes_from_the_checkpoint(
    store: LedgerStore, capture_dir: Path, options: FollowOptions
) -> None:
    path = capture_dir / "1-0.capture.jsonl"
    append(path, b"".join(line(chat_exchange(model_call_id=f"x{n}")) for n in range(700)))
    append(path, b"\n[]\n")  # a damaged line must not be counted twice either
    progress: list[tuple[int, int]] = []
    first = CaptureDirFollower(
        store, capture_dir, options=options, progress=lambda d, t: progress.append((d, t))
    )
    await first.start()
    await asyncio.wait_for(first.caught_up.wait(), DEADLINE_S)
    await first.stop()
    size = path.stat().st_size
    assert progress[0] == (0, size) and progress[-1] == (size, size)
    assert first.catch_up.lines == 701 and first.catch_up.damaged == 1
    assert first.catch_up.captured == 700
    append(path, line(chat_exchange(model_call_id="after")))
    second = CaptureDirFollower(store, capture_dir, options=options)
    await second.start()
    await asyncio.wait_for(second.caught_up.wait(), DEADLINE_S)
    await second.stop()
    assert second.catch_up.lines == 1 and second.catch_up.captured == 1
    ids = await call_ids(store, "1-0")
    assert ids == [f"x{n}" for n in range(700)] + ["after"]
    assert await count_kind(store, "model_call.damaged") == 1
    async with store.read() as conn:
        row = (await conn.execute(select(capture_follow_files))).one()
    assert row.byte_offset == path.stat().st_size and row.lines == 702


async def test_two_followers_on_one_directory_ingest_each_line_once(
    store: LedgerStore, capture_dir: Path, options: FollowOptions
) -> None:
    followers = [CaptureDirFollower(store, capture_dir, options=options) for _ in range(2)]
    for running in followers:
        await running.start()
    try:
        for n in range(30):
            append(
                capture_dir / f"{n % 3}-0.capture.jsonl", line(chat_exchange(model_call_id=f"m{n}"))
            )

        async def all_in() -> bool:
            return await count_kind(store, "model_call.captured") >= 30

        await eventually(all_in, "thirty lines")
        for running in followers:
            await asyncio.wait_for(running.caught_up.wait(), DEADLINE_S)
    finally:
        for running in followers:
            await running.stop()
    assert await count_kind(store, "model_call.captured") == 30
    for n in range(3):
        assert await call_ids(store, f"{n}-0") == [f"m{i}" for i in range(n, 30, 3)]


async def test_invalid_names_are_skipped(
    store: LedgerStore, capture_dir: Path, follower: CaptureDirFollower
) -> None:
    append(capture_dir / "bad id.capture.jsonl", line(chat_exchange()))
    append(capture_dir / "2-0.capture.jsonl", line(chat_exchange(model_call_id="fine")))

    async def fine() -> bool:
        return await call_ids(store, "2-0") == ["fine"]

    await eventually(fine, "the valid file")
    assert await count_kind(store, "model_call.captured") == 1
    assert follower.total.skipped_files == {"bad id.capture.jsonl"}
