"""Rows of an older Gym model server (no chain_hash, cumulative_hash or response_id): recorded
as they came, reported by the manifest as Gym's reader reports them, and the same through the
mirror and ``ledger import``, on every backend."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from ledger.areas.lineage.mirror import LineageMirrorArea
from ledger.areas.lineage.service import LineageService
from ledger.gym.lineage import (
    LEDGER_ROW_MISSING_CHAIN_HASH,
    LEDGER_ROW_MISSING_RESPONSE_ID,
    CommittedRow,
    build_manifest,
)
from ledger.log import migrate
from ledger.log.store import LedgerStore
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row, legacy_rows
from tests.lineage.test_import import imported_state, run_import
from tests.lineage.test_mirror_area import files_in, replay

EXPECTED_FAILURES = [
    {"schema_version": 2, "model_call_id": "c2", "reason": LEDGER_ROW_MISSING_RESPONSE_ID},
    {"schema_version": 2, "model_call_id": "c3", "reason": LEDGER_ROW_MISSING_CHAIN_HASH},
    {"schema_version": 2, "model_call_id": "c4", "reason": LEDGER_ROW_MISSING_CHAIN_HASH},
]


async def test_rows_route_records_them_and_the_manifest_fails_them(
    client: httpx.AsyncClient,
) -> None:
    for row in legacy_rows("r1"):
        reply = await client.post("/v1/rollouts/r1/ledger/rows", json=row)
        assert reply.status_code == 200, reply.text
        assert reply.json()["outcome"] == "recorded"
    manifest = await client.get(
        "/training-token-capture/control/rollouts/r1/manifest", headers=CONTROL_HEADERS
    )
    body = manifest.json()
    assert [r["model_call_id"] for r in body["records"]] == ["c1"]
    assert body["failures"] == EXPECTED_FAILURES
    # The row is kept as it came: the missing columns are still missing when read back.
    found = await client.get("/v1/rollouts/r1/ledger/rows", params={"model_call_id": "c2"})
    stored = found.json()["rows"][0]["row"]
    assert "response_id" not in stored and "chain_hash" not in stored
    # A re-record of the same legacy row is a duplicate; the same call WITH the columns is not.
    again = await client.post("/v1/rollouts/r1/ledger/rows", json=legacy_rows("r1")[1])
    assert again.json()["outcome"] == "duplicate"
    full = committed_row("r1", "c2")
    assert (await client.post("/v1/rollouts/r1/ledger/rows", json=full)).status_code == 409


async def test_mirror_and_import_agree_with_the_api(store: LedgerStore, tmp_path: Path) -> None:
    service = LineageService(store)
    for row in legacy_rows("r1"):
        await service.record("r1", CommittedRow.model_validate(row))
    served = await service.manifest("r1")
    assert [f.model_dump(mode="json") for f in served.failures] == EXPECTED_FAILURES

    area = LineageMirrorArea()
    directory = tmp_path / "mirror" / area.name
    await replay(store, area, directory)
    lines = files_in(directory)["r1.lineage.jsonl"].decode().splitlines()
    assert [json.loads(line) for line in lines] == legacy_rows("r1")  # columns still absent
    assert build_manifest("r1", [json.loads(line) for line in lines]) == served

    fresh = f"sqlite+aiosqlite:///{tmp_path / 'imported.db'}"
    await migrate.upgrade(fresh)
    output = await asyncio.to_thread(run_import, fresh, directory)
    assert "4 rows recorded" in output
    _, manifests = await asyncio.to_thread(lambda: asyncio.run(imported_state(fresh)))
    assert manifests["r1"] == served
