"""SIGKILL a real server mid-load, restart, repeat: every acknowledged capture is there once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.client_connections import client_limits
from ledger.log import migrate
from ledger.log.store import LedgerStore
from tests.suites.cli import ledger_cli
from tests.support.databases import sqlite_url
from tests.support.load import LoadLedger, capture_client
from tests.support.mirror import wait_for_mirror
from tests.support.server import ServerProcess
from tests.support.stored import stored_calls

pytestmark = pytest.mark.slow

CYCLES = 5
CLIENTS = 16
KILL_AFTER = 120  # acknowledged captures per cycle before the kill


async def _kill_when(server: ServerProcess, record: LoadLedger, count: int) -> None:
    record.threshold = count
    record.reached.clear()
    await record.reached.wait()
    server.kill()


async def test_sigkill_mid_load_loses_no_acknowledged_capture(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    database_url = sqlite_url(tmp_path)
    await migrate.upgrade(database_url)
    record = LoadLedger()
    for cycle in range(CYCLES):
        server = ServerProcess(data_dir=data_dir, database_url=database_url).start()
        try:
            # Whatever was sent but not acknowledged before the last kill is re-sent first:
            # the same exchange again must be accepted exactly once (201 or 200).
            async with asyncio.timeout(120):
                await _resend_unacknowledged(server.base_url, record)
                stop = asyncio.Event()
                killer = asyncio.create_task(
                    _kill_when(server, record, len(record.acknowledged) + KILL_AFTER)
                )
                await asyncio.gather(
                    *(
                        capture_client(
                            server.base_url,
                            name=f"c{cycle}-{n}",
                            record=record,
                            stop=stop,
                            limit=10_000,
                        )
                        for n in range(CLIENTS)
                    )
                )
                await killer
        finally:
            server.kill()
        assert server.process is not None and server.process.returncode == -9
        assert not any("409" in e or "500" in e for e in record.errors), record.errors
    # Restart once more and let the mirror converge.
    with ServerProcess(data_dir=data_dir, database_url=database_url) as server:
        await _resend_unacknowledged(server.base_url, record)
        store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
        await store.open()
        try:
            await wait_for_mirror(store, within_seconds=120)
        finally:
            await store.close()
    stored = await stored_calls(database_url)
    assert set(record.sent) == set(stored), "a sent capture is missing or unknown"
    assert all(len(places) == 1 for places in stored.values())
    for model_call_id, reply in record.acknowledged.items():
        assert stored[model_call_id] == [(reply["seq"], reply["call_index"])], model_call_id
    assert len(record.acknowledged) >= CYCLES * KILL_AFTER
    verified = ledger_cli(database_url, data_dir, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    mirrored = ledger_cli(database_url, data_dir, "mirror", "verify")
    assert mirrored.returncode == 0, mirrored.stdout + mirrored.stderr


async def _resend_unacknowledged(base_url: str, record: LoadLedger) -> None:
    import httpx

    pending = [m for m in record.sent if m not in record.acknowledged]
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=client_limits()) as http:
        for model_call_id in pending:
            rollout_id, exchange = record.sent[model_call_id]
            reply = await http.post(f"/v1/rollouts/{rollout_id}/model-calls", json=exchange)
            assert reply.status_code in (200, 201), reply.text
            record.acknowledged[model_call_id] = reply.json()
