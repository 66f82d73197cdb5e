"""The lineage mirror end to end: the follower keeps Gym's ``lineage/`` files, and Gym's way of
reading them (rows → manifest, fence file → 410) agrees with the control routes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from ledger.app.areas import (
    default_catalogue,
    default_mirror_areas,
    write_side_projectors,
)
from ledger.app.bootstrap import Ledger
from ledger.app.config import Settings
from ledger.areas.lineage.service import LineageService
from ledger.gym.lineage import CommittedRow, build_manifest, manifest_json
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.mirror.checkpoint import write_checkpoint
from ledger.mirror.follower import build_follower
from ledger.mirror.sync import compare_mirror, snapshot
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row, failure_row
from tests.support.mirror import wait_for_mirror

CONTROL = "/training-token-capture/control"


def gym_manifest_or_gone(directory: Path, rollout_id: str) -> dict[str, Any] | str:
    """What Gym's FileLineageStore would answer from the files alone."""
    if (directory / f"{rollout_id}.lineage.retired").exists():
        return "gone"
    path = directory / f"{rollout_id}.lineage.jsonl"
    rows = [json.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []
    return manifest_json(build_manifest(rollout_id, rows))


async def test_gym_reads_of_the_mirror_equal_the_control_routes(
    app: FastAPI, client: httpx.AsyncClient, settings: Settings
) -> None:
    ids = ["r1", "r2", "r3", "r4", "never"]
    for rollout_id in ids[:4]:
        root = committed_row(rollout_id, "c1")
        for row in (root, failure_row("c2"), committed_row(rollout_id, "c3", parent=root)):
            reply = await client.post(f"/v1/rollouts/{rollout_id}/ledger/rows", json=row)
            assert reply.status_code == 200
    await client.post(
        f"{CONTROL}/rollouts/retire",
        json={"rollout_ids": ["r2", "r3", "never"]},
        headers=CONTROL_HEADERS,
    )
    await client.post("/v1/rollouts/r2/ledger/rows", json=committed_row("r2", "late"))
    await client.post(
        f"{CONTROL}/rollouts/delete", json={"rollout_ids": ["r3", "r4"]}, headers=CONTROL_HEADERS
    )
    await client.post("/v1/rollouts/r4/ledger/rows", json=committed_row("r4", "reused"))
    ledger: Ledger = app.state.ledger
    await wait_for_mirror(ledger.store)

    directory = settings.resolved_mirror_dir / "lineage"
    assert sorted(p.name for p in directory.iterdir()) == [
        "never.lineage.retired",
        "r1.lineage.jsonl",
        "r2.lineage.retired",
        "r4.lineage.jsonl",
    ]
    for rollout_id in ids:
        served = await client.get(
            f"{CONTROL}/rollouts/{rollout_id}/manifest", headers=CONTROL_HEADERS
        )
        expected = "gone" if served.status_code == 410 else served.json()
        assert gym_manifest_or_gone(directory, rollout_id) == expected, rollout_id
    async with snapshot(ledger.store.read_engine) as conn:
        report = await compare_mirror(conn, settings.resolved_mirror_dir, default_mirror_areas())
    assert report.differences == []


async def test_restart_after_a_half_applied_page_converges(
    database_url: str, tmp_path: Path
) -> None:
    mirror_dir = tmp_path / "mirror"
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        lineage = LineageService(store)
        follower = build_follower(store=store, mirror_dir=mirror_dir, areas=default_mirror_areas())
        await follower.start()
        for n in range(4):
            await lineage.record("r1", CommittedRow.model_validate(committed_row("r1", f"c{n}")))
        await lineage.retire(["r2"])
        await wait_for_mirror(store)
        await follower.stop()

        def rewind(tx: WriteTransaction) -> None:
            write_checkpoint(tx.conn, 2)

        await store.execute(rewind)
        ledger_file = mirror_dir / "lineage" / "r1.lineage.jsonl"
        lines = ledger_file.read_bytes().splitlines(keepends=True)
        ledger_file.write_bytes(b"".join(lines) + lines[-1] + b'{"model_ca')  # doubled + torn
        (mirror_dir / "lineage" / "r2.lineage.retired").unlink()
        await lineage.record("r3", CommittedRow.model_validate(committed_row("r3", "c1")))

        follower = build_follower(store=store, mirror_dir=mirror_dir, areas=default_mirror_areas())
        await follower.start()
        await wait_for_mirror(store)
        await follower.stop()
        async with snapshot(store.read_engine) as conn:
            report = await compare_mirror(conn, mirror_dir, default_mirror_areas())
        assert report.differences == []
        assert len(ledger_file.read_bytes().splitlines()) == 4
        assert (mirror_dir / "lineage" / "r2.lineage.retired").read_bytes() == b""
    finally:
        await store.close()
