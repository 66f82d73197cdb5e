"""Two server processes on one database, 8 clients each: no client error, nothing lost."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.service import CaptureService
from ledger.log.store import LedgerStore
from tests.support.load import LoadLedger, capture_client
from tests.support.mirror import wait_for_mirror
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

CLIENTS_PER_SERVER = 8
CAPTURES_PER_CLIENT = 25


async def assert_each_capture_once(database_url: str, record: LoadLedger) -> None:
    """Every acknowledged capture is stored once at its acknowledged position, positions are
    gapless, and the mirror has caught up."""
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        captures = CaptureService(store)
        for model_call_id, acknowledged in record.acknowledged.items():
            rollout_id = record.sent[model_call_id][0]
            calls = (await captures.model_calls(rollout_id, payloads=False))["calls"]
            matching = [c for c in calls if c["model_call_id"] == model_call_id]
            assert [c["call_index"] for c in matching] == [acknowledged["call_index"]]
        for rollout_id in {rollout for rollout, _ in record.sent.values()}:
            calls = (await captures.model_calls(rollout_id, payloads=False))["calls"]
            assert [c["call_index"] for c in calls] == list(range(len(calls)))
        await wait_for_mirror(store, within_seconds=120)
    finally:
        await store.close()


def alive_after(pids: list[int], timeout: float) -> list[int]:
    """``alive(pids)`` once it is empty, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (running := alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.05)  # poll
    return running


def alive(pids: list[int]) -> list[int]:
    """The processes among ``pids`` that still run (not gone, not zombies)."""
    running = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state != "Z":
            running.append(pid)
    return running


async def test_one_server_with_two_worker_processes(database_url: str, tmp_path: Path) -> None:
    """``ledger serve --workers 2``: two processes on one port, each with its own writer,
    taking turns on the database (a file lock on SQLite, the advisory lock on PostgreSQL)."""
    server = ServerProcess(
        data_dir=tmp_path, database_url=database_url, argv=("ledger", "serve", "--workers", "2")
    )
    record = LoadLedger()
    workers: list[int] = []
    try:
        server.start()
        workers = server.wait_for_children(2)
        async with asyncio.timeout(180):
            await asyncio.gather(
                *(
                    capture_client(
                        server.base_url,
                        name=f"c{n}",
                        record=record,
                        stop=asyncio.Event(),
                        limit=CAPTURES_PER_CLIENT,
                        rollouts=2,
                    )
                    for n in range(2 * CLIENTS_PER_SERVER)
                )
            )
        # The server's log says why, when a client could not even connect (seen once in CI).
        assert record.errors == [], server.log_path.read_text()[-4000:]
        assert len(record.acknowledged) == 2 * CLIENTS_PER_SERVER * CAPTURES_PER_CLIENT
        await assert_each_capture_once(database_url, record)
        lines = sum(
            len(path.read_bytes().splitlines())
            for path in (tmp_path / "mirror" / "model-calls").glob("*.capture.jsonl")
        )
        assert lines == len(record.acknowledged)
    finally:
        server.stop()
    # Stopping the server stops its workers too. The children counted may include
    # multiprocessing's resource tracker, which exits a moment after the parent: poll briefly.
    assert await asyncio.to_thread(alive_after, workers, 10.0) == []


async def test_two_processes_share_one_database(database_url: str, tmp_path: Path) -> None:
    servers = []
    for n in range(2):
        data_dir = tmp_path / f"data-{n}"
        data_dir.mkdir()
        servers.append(ServerProcess(data_dir=data_dir, database_url=database_url))
    record = LoadLedger()
    stop = asyncio.Event()
    try:
        for server in servers:
            server.start()
        async with asyncio.timeout(180):
            await asyncio.gather(
                *(
                    capture_client(
                        server.base_url,
                        # Both processes write to the same rollouts: positions must interleave.
                        name=f"s{index}-c{n}",
                        record=record,
                        stop=stop,
                        limit=CAPTURES_PER_CLIENT,
                        rollouts=2,
                    )
                    for index, server in enumerate(servers)
                    for n in range(CLIENTS_PER_SERVER)
                )
            )
            # Shared rollouts written through both processes: positions are gapless.
            async with httpx.AsyncClient(base_url=servers[0].base_url) as http:
                for n in range(10):
                    rollout = "shared"
                    target = servers[n % 2].base_url
                    reply = await http.post(
                        f"{target}/v1/rollouts/{rollout}/model-calls",
                        json={"model_call_id": f"shared-{n}", "dialect": "chat"},
                    )
                    assert reply.status_code == 201, reply.text
                    assert reply.json()["call_index"] == n
        assert record.errors == []
        assert len(record.acknowledged) == 2 * CLIENTS_PER_SERVER * CAPTURES_PER_CLIENT
        # Exactly one of the two processes mirrors, and it converges.
        await assert_each_capture_once(database_url, record)
        mirror_dirs = [
            server.data_dir / "mirror" / "model-calls"
            for server in servers
            if (server.data_dir / "mirror" / "model-calls").exists()
        ]
        assert len(mirror_dirs) == 1
        lines = sum(
            len(path.read_bytes().splitlines()) for path in mirror_dirs[0].glob("*.capture.jsonl")
        )
        assert lines == len(record.acknowledged) + 10
    finally:
        for server in servers:
            server.stop()
