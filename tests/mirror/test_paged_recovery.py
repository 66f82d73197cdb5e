"""A recovery rewrites the mirror a page of rollouts a snapshot (mirror/sync.py,
``catch_up_files``), not all of it in one: events appended to a rollout already rewritten, or to
a new one, while later pages are written, are in the files when it returns, and the files agree
with the database at the head it returns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.app.areas import default_catalogue, default_mirror_areas, write_side_projectors
from ledger.areas.captures.service import CaptureService
from ledger.log.store import LedgerStore
from ledger.mirror import sync
from ledger.mirror.sync import catch_up_files, compare_mirror, snapshot
from tests.support.exchanges import chat_exchange

ROLLOUTS = [f"r{n}" for n in range(6)]


async def _pages_with_appends_between(
    monkeypatch: pytest.MonkeyPatch, captures: CaptureService, name: str
) -> list[list[str]]:
    """The pages ``name`` (``rollout_ids`` or ``rollouts_touched``) served; after the first, a
    capture is appended to its first rollout and to a new one."""
    served: list[list[str]] = []
    original = getattr(sync, name)

    async def paged(conn: AsyncConnection, **kwargs: object) -> Sequence[str]:
        page: list[str] = await original(conn, **kwargs)
        if len(served) == 1 and kwargs.get("limit") == sync.RECOVERY_PAGE:
            await captures.append(served[0][0], chat_exchange(model_call_id="late"))
            await captures.append("new", chat_exchange(model_call_id="late"))
        served.append(page)
        return page

    monkeypatch.setattr(sync, name, paged)
    return served


@pytest.mark.parametrize("after", [None, 0], ids=["rebuild", "touched"])
async def test_appends_between_pages_are_in_the_files_at_the_head_returned(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int | None
) -> None:
    mirror_dir = tmp_path / "mirror"
    areas = default_mirror_areas()
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        captures = CaptureService(store)
        for n, rollout in enumerate(ROLLOUTS * 2):
            await captures.append(rollout, chat_exchange(model_call_id=f"c{n}"))
        monkeypatch.setattr(sync, "RECOVERY_PAGE", 2)
        served = await _pages_with_appends_between(
            monkeypatch, captures, "rollout_ids" if after is None else "rollouts_touched"
        )
        caught_up = await catch_up_files(store.read_engine, mirror_dir, areas, after=after)
        # Three pages of two rollouts (the appends came at the second), and an empty one.
        assert [len(page) for page in served[:4]] == [2, 2, 2, 0]
        async with snapshot(store.read_engine) as conn:
            report = await compare_mirror(conn, mirror_dir, areas)
        assert report.differences == []
        assert caught_up.head == report.head == len(ROLLOUTS) * 2 + 2
        first = mirror_dir / "model-calls" / f"{served[0][0]}.capture.jsonl"
        assert len(first.read_bytes().splitlines()) == 3
        assert (mirror_dir / "model-calls" / "new.capture.jsonl").exists()
    finally:
        await store.close()
