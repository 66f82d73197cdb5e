"""The capture mirror: Gym's readers on the files see exactly what the ledger serves."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from click.testing import CliRunner, Result
from fastapi import FastAPI

from ledger.app.areas import (
    default_catalogue,
    default_mirror_areas,
    write_side_projectors,
)
from ledger.app.bootstrap import Ledger, catch_up_views
from ledger.app.cli.main import main
from ledger.app.config import Settings
from ledger.areas.captures.service import CaptureService
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.mirror.checkpoint import write_checkpoint
from ledger.mirror.follower import build_follower
from ledger.mirror.sync import compare_mirror, snapshot
from tests.support.exchanges import (
    chat_exchange,
    failed_exchange,
    messages_exchange,
    responses_exchange,
)
from tests.support.mirror import gym_strict_records, gym_tolerant_records, wait_for_mirror


def _running(app: FastAPI) -> Ledger:
    ledger: Ledger = app.state.ledger
    return ledger


async def _cli(settings: Settings, *args: str) -> Result:
    runner = CliRunner()
    return await asyncio.to_thread(
        runner.invoke,
        main,
        [
            "--data-dir",
            str(settings.data_dir),
            "--database-url",
            settings.resolved_database_url,
            *args,
        ],
    )


async def test_gym_reads_of_the_mirror_equal_the_model_calls_route(
    app: FastAPI, client: httpx.AsyncClient, settings: Settings
) -> None:
    for exchange in (chat_exchange(), responses_exchange(), failed_exchange()):
        await client.post("/v1/rollouts/r1/model-calls", json=exchange)
    await client.post("/v1/rollouts/r2/model-calls", json=messages_exchange())
    await client.post("/v1/rollouts/r2/model-calls/incomplete")
    await client.post("/v1/rollouts/r3/model-calls", json=chat_exchange())
    await client.delete("/v1/rollouts/r3/model-calls")
    await client.post("/v1/rollouts/r3/model-calls", json=messages_exchange())
    await client.post("/v1/rollouts/r4/model-calls", json=chat_exchange())
    await client.delete("/v1/rollouts/r4/model-calls")
    await wait_for_mirror(_running(app).store)
    directory = settings.resolved_mirror_dir / "model-calls"
    for rollout_id in ("r1", "r2", "r3", "r4"):
        served = (await client.get(f"/v1/rollouts/{rollout_id}/model-calls")).json()
        path = directory / f"{rollout_id}.capture.jsonl"
        tolerant, damaged = gym_tolerant_records(path)
        assert tolerant == served["calls"], rollout_id
        assert gym_strict_records(path) == served["calls"], rollout_id
        assert damaged == 0
        marker = (directory / f"{rollout_id}.capture.incomplete").exists()
        assert marker == any(g["code"] == "model_call_capture_incomplete" for g in served["gaps"])
    assert not (directory / "r4.capture.jsonl").exists()
    assert len((directory / "r1.capture.jsonl").read_bytes().splitlines()) == 3
    metrics = (await client.get("/metrics")).text
    assert "ledger_mirror_lag_events 0.0" in metrics


async def test_restart_after_a_half_applied_page_converges(
    database_url: str, tmp_path: Path
) -> None:
    """Lines appended but the checkpoint not advanced (a kill between the two): no duplicate."""
    mirror_dir = tmp_path / "mirror"
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        captures = CaptureService(store)
        follower = build_follower(store=store, mirror_dir=mirror_dir, areas=default_mirror_areas())
        await follower.start()
        for n in range(5):
            await captures.append("r1", chat_exchange(model_call_id=f"c{n}"))
            await captures.append("r2", responses_exchange(model_call_id=f"d{n}"))
        await wait_for_mirror(store)
        await follower.stop()

        # Roll the checkpoint back as if the last pages were applied but not checkpointed,
        # and damage the files the way a kill mid-append could leave them.
        def rewind(tx: WriteTransaction) -> None:
            write_checkpoint(tx.conn, 3)

        await store.execute(rewind)
        r1 = mirror_dir / "model-calls" / "r1.capture.jsonl"
        r1.write_bytes(r1.read_bytes() + r1.read_bytes().splitlines(keepends=True)[-1] + b'{"hal')
        (mirror_dir / "model-calls" / "r2.capture.jsonl").unlink()
        await captures.append("r3", chat_exchange())

        follower = build_follower(store=store, mirror_dir=mirror_dir, areas=default_mirror_areas())
        await follower.start()
        await wait_for_mirror(store)
        await follower.stop()
        async with snapshot(store.read_engine) as conn:
            report = await compare_mirror(conn, mirror_dir, default_mirror_areas())
        assert report.differences == []
        assert len(r1.read_bytes().splitlines()) == 5
    finally:
        await store.close()


async def test_verify_and_rebuild_commands(
    app: FastAPI, client: httpx.AsyncClient, settings: Settings
) -> None:
    await client.post("/v1/rollouts/r1/model-calls", json=chat_exchange())
    await client.post("/v1/rollouts/r2/model-calls/incomplete")
    await wait_for_mirror(_running(app).store)
    ok = await _cli(settings, "mirror", "verify")
    assert ok.exit_code == 0, ok.output
    assert "matches" in ok.output
    status = await _cli(settings, "mirror", "status")
    assert "lag:          0 events" in status.output

    directory = settings.resolved_mirror_dir / "model-calls"
    (directory / "r1.capture.jsonl").write_bytes(b"")
    (directory / "r2.capture.incomplete").unlink()
    (directory / "stray.capture.jsonl").write_bytes(b"{}\n")
    bad = await _cli(settings, "mirror", "verify")
    assert bad.exit_code == 1
    assert "model-calls/r1.capture.jsonl: differs" in bad.output
    assert "model-calls/r2.capture.incomplete: missing" in bad.output
    assert "model-calls/stray.capture.jsonl: not a file of any rollout" in bad.output

    refused = await _cli(settings, "mirror", "rebuild")
    assert refused.exit_code == 1 and "a mirror follower is running" in refused.output
    ledger = _running(app)
    assert ledger.mirror is not None
    await ledger.mirror.stop()
    rebuilt = await _cli(settings, "mirror", "rebuild")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "removed model-calls/stray.capture.jsonl" in rebuilt.output
    again = await _cli(settings, "mirror", "verify")
    assert again.exit_code == 0, again.output


async def test_delete_ends_the_generation_in_the_mirror(database_url: str, tmp_path: Path) -> None:
    mirror_dir = tmp_path / "mirror"
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    follower = build_follower(store=store, mirror_dir=mirror_dir, areas=default_mirror_areas())
    await follower.start()
    try:
        captures = CaptureService(store)
        await captures.append("r1", chat_exchange(model_call_id="old"))
        await captures.mark_incomplete("r1")
        await wait_for_mirror(store)
        directory = mirror_dir / "model-calls"
        assert (directory / "r1.capture.incomplete").exists()
        await store.append(NewEvent(ROLLOUT_DELETED, {"had_rows": True}, rollout_id="r1"))
        await wait_for_mirror(store)
        assert sorted(p.name for p in directory.iterdir()) == []
        await captures.append("r1", chat_exchange(model_call_id="new"))
        await wait_for_mirror(store)
        await catch_up_views(store)
        served = (await captures.model_calls("r1", payloads=True))["calls"]
        assert gym_strict_records(directory / "r1.capture.jsonl") == served
        assert [c["model_call_id"] for c in served] == ["new"]
    finally:
        await follower.stop()
        await store.close()
