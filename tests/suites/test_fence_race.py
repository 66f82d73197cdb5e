"""Fence race across two server processes on one database (issue 14, standing suites).

Two ``ledger serve`` processes share one SQLite file (or one PostgreSQL database). In each
round, writers append rows to fresh rollouts through both processes and readers poll the
rollouts' manifests through both, while a retire of those rollouts is sent to one of them.
A violation is any manifest read started after the retire was acknowledged that still shows
rows (it must answer 410), any manifest ever showing a row the log does not record before
the fence, or any row sent after the acknowledgement that was recorded rather than discarded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from ledger.client_connections import client_limits
from tests.lineage.rows import committed_row
from tests.suites.cli import assert_ledger_verifies, mirror_caught_up
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

CONTROL = "/training-token-capture/control"
TOKEN = "race-control"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
ROUNDS = 36
ROLLOUTS_PER_ROUND = 4
WRITERS = 6
READERS = 4
ROWS_BEFORE_RETIRE = 24  # per round, across the writers
LATE_ROWS_PER_WRITER = 3
LATE_READS_PER_READER = 3


@dataclass
class Round:
    rollouts: list[str]
    retire_acked_at: float | None = None
    rows: list[tuple[str, str, float, str, int]] = field(default_factory=list)
    reads: list[tuple[str, float, int, frozenset[str]]] = field(default_factory=list)
    warmed_up: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
def servers(tmp_path: Path, database_url: str) -> Iterator[list[ServerProcess]]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = {"LEDGER_CONTROL_TOKEN": TOKEN}
    first = ServerProcess(data_dir=data_dir, database_url=database_url, env=env).start()
    try:
        second = ServerProcess(data_dir=data_dir, database_url=database_url, env=env).start()
        try:
            yield [first, second]
        finally:
            second.stop()
    finally:
        first.stop()


def after_ack(race: Round, started: float) -> bool:
    return race.retire_acked_at is not None and started > race.retire_acked_at


async def row_writer(http: httpx.AsyncClient, race: Round, name: str) -> None:
    late = n = 0
    while late < LATE_ROWS_PER_WRITER:
        rollout_id = race.rollouts[n % len(race.rollouts)]
        model_call_id = f"{name}-{n}"
        n += 1
        started = time.monotonic()
        reply = await http.post(
            f"/v1/rollouts/{rollout_id}/ledger/rows",
            json=committed_row(rollout_id, model_call_id),
        )
        assert reply.status_code == 200, reply.text
        body = reply.json()
        race.rows.append((rollout_id, model_call_id, started, body["outcome"], body["seq"]))
        if len(race.rows) >= ROWS_BEFORE_RETIRE:
            race.warmed_up.set()
        late += after_ack(race, started)


async def manifest_reader(http: httpx.AsyncClient, race: Round, offset: int) -> None:
    late = n = 0
    while late < LATE_READS_PER_READER:
        rollout_id = race.rollouts[(offset + n) % len(race.rollouts)]
        n += 1
        started = time.monotonic()
        reply = await http.get(f"{CONTROL}/rollouts/{rollout_id}/manifest", headers=HEADERS)
        assert reply.status_code in (200, 410), reply.text
        shown = (
            frozenset(r["model_call_id"] for r in reply.json()["records"])
            if reply.status_code == 200
            else frozenset()
        )
        race.reads.append((rollout_id, started, reply.status_code, shown))
        late += after_ack(race, started)


async def run_round(clients: list[httpx.AsyncClient], race: Round, number: int) -> None:
    tasks = [
        asyncio.create_task(row_writer(clients[i % 2], race, f"r{number}w{i}"))
        for i in range(WRITERS)
    ] + [
        asyncio.create_task(manifest_reader(clients[(i + 1) % 2], race, i)) for i in range(READERS)
    ]
    await race.warmed_up.wait()
    retire = await clients[number % 2].post(
        f"{CONTROL}/rollouts/retire", json={"rollout_ids": race.rollouts}, headers=HEADERS
    )
    race.retire_acked_at = time.monotonic()
    assert retire.status_code == 200, retire.text
    await asyncio.gather(*tasks)


async def recorded_rows(http: httpx.AsyncClient) -> dict[str, set[str]]:
    """rollout_id -> the model_call_ids the log records for it (row_recorded events)."""
    recorded: dict[str, set[str]] = {}
    after = 0
    while True:
        page = (await http.get("/v1/events", params={"after": after, "limit": 1000})).json()
        if not page["events"]:
            return recorded
        for event in page["events"]:
            if event["kind"] == "ledger.row_recorded":
                recorded.setdefault(event["rollout_id"], set()).add(
                    event["payload"]["row"]["model_call_id"]
                )
        after = page["next_after"]


def violations(race: Round, recorded: dict[str, set[str]]) -> list[str]:
    assert race.retire_acked_at is not None
    found = []
    for rollout_id, started, status, shown in race.reads:
        if started > race.retire_acked_at and status != 410:
            found.append(f"{rollout_id}: manifest answered {status} after the retire ack")
        if not shown <= recorded.get(rollout_id, set()):
            found.append(f"{rollout_id}: manifest showed rows the log never recorded")
    for rollout_id, model_call_id, started, outcome, _seq in race.rows:
        if started > race.retire_acked_at and outcome != "discarded":
            found.append(f"{rollout_id}/{model_call_id}: sent after the ack and {outcome}")
    return found


async def test_no_row_is_visible_in_a_manifest_after_the_retire_ack(
    servers: list[ServerProcess], database_url: str, tmp_path: Path
) -> None:
    clients = [
        httpx.AsyncClient(base_url=s.base_url, timeout=60, limits=client_limits()) for s in servers
    ]
    races = [Round([f"race{n}-{i}" for i in range(ROLLOUTS_PER_ROUND)]) for n in range(ROUNDS)]
    try:
        for number, race in enumerate(races):
            async with asyncio.timeout(60):
                await run_round(clients, race, number)
        recorded = await recorded_rows(clients[1])
        await mirror_caught_up(database_url)
    finally:
        for http in clients:
            await http.aclose()
    found = [v for race in races for v in violations(race, recorded)]
    reads = [read for race in races for read in race.reads]
    late_reads = sum(1 for race in races for read in race.reads if after_ack(race, read[1]))
    late_rows = sum(1 for race in races for row in race.rows if after_ack(race, row[2]))
    shown_rows = sum(len(read[3]) for read in reads)
    print(
        f"fence race: {ROUNDS} rounds, {len(reads)} manifest reads ({late_reads} after the "
        f"ack, {shown_rows} rows shown), {late_rows} late rows, {len(found)} violations"
    )
    assert found == [], found[:10]
    assert late_reads >= ROUNDS * READERS * LATE_READS_PER_READER
    assert late_rows >= ROUNDS * WRITERS * LATE_ROWS_PER_WRITER
    assert shown_rows > 0, "no manifest read before a retire showed any row"
    for server in servers:
        server.stop()
    assert_ledger_verifies(database_url, servers[0].data_dir)
