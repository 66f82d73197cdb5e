"""A mirror checkpoint of another epoch of the log (a restored copy) is not trusted: the
follower rebuilds the files instead of catching up from a seq that may name other events."""

from __future__ import annotations

from pathlib import Path

from ledger.app.areas import (
    default_catalogue,
    default_mirror_areas,
    write_side_projectors,
)
from ledger.areas.captures.service import CaptureService
from ledger.log.epoch import read_epoch, set_epoch
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.mirror.checkpoint import load_checkpoint
from ledger.mirror.follower import build_follower
from ledger.mirror.sync import compare_mirror, snapshot
from tests.support.exchanges import chat_exchange
from tests.support.mirror import wait_for_mirror


async def _follow_until_caught_up(store: LedgerStore, mirror_dir: Path) -> None:
    follower = build_follower(store=store, mirror_dir=mirror_dir, areas=default_mirror_areas())
    await follower.start()
    try:
        await wait_for_mirror(store)
    finally:
        await follower.stop()


async def test_a_checkpoint_of_another_epoch_makes_the_follower_rebuild(
    database_url: str, tmp_path: Path
) -> None:
    mirror_dir = tmp_path / "mirror"
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        captures = CaptureService(store)
        for n in range(4):
            await captures.append("r1", chat_exchange(model_call_id=f"c{n}"))
        await _follow_until_caught_up(store, mirror_dir)
        async with store.read() as conn:
            first = await load_checkpoint(conn)
            old_epoch = await read_epoch(conn)
        assert first.trusted and first.seq == 4

        # What a restore leaves: a new epoch, a checkpoint at the head, and files that are
        # not this log's (a rollout it does not have, a file that is behind).
        def restored(tx: WriteTransaction) -> None:
            set_epoch(tx.conn)

        await store.execute(restored)
        directory = mirror_dir / "model-calls"
        (directory / "ghost.capture.jsonl").write_bytes(
            (directory / "r1.capture.jsonl").read_bytes()
        )
        (directory / "r1.capture.jsonl").write_bytes(b"")
        async with store.read() as conn:
            stale = await load_checkpoint(conn)
            assert await read_epoch(conn) != old_epoch
        assert stale == type(stale)(seq=4, trusted=False)

        await _follow_until_caught_up(store, mirror_dir)
        async with snapshot(store.read_engine) as conn:
            report = await compare_mirror(conn, mirror_dir, default_mirror_areas())
            after = await load_checkpoint(conn)
        assert report.differences == []
        assert not (directory / "ghost.capture.jsonl").exists()
        assert len((directory / "r1.capture.jsonl").read_bytes().splitlines()) == 4
        assert after.trusted and after.seq == 4
    finally:
        await store.close()
