"""Linearizable fences across real server processes, on SQLite and on PostgreSQL.

Writers keep appending rows to a set of rollouts through two server processes while a retire
for those rollouts is sent to one of them. Afterwards, from the replies and the event log:

* no row whose request started after the retire reply arrived was ever recorded (every one is
  discarded), whichever process served it;
* every row has exactly one fate in the log: recorded before its rollout's fence, or discarded
  after it; nothing is lost or duplicated, and each reply names the event that decided it;
* every row in a manifest read before the retire is among the recorded rows, and the rows
  recorded are exactly the manifest as of the fence (nothing appears after it): the manifest
  route answers 410 on both processes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

CONTROL = "/training-token-capture/control"
ROLLOUTS = [f"lin-{i}" for i in range(6)]
WRITERS = 8
ROWS_BEFORE_RETIRE = 60
ROWS_AFTER_RETIRE_PER_WRITER = 4


@dataclass
class Sent:
    rollout_id: str
    model_call_id: str
    started: float
    outcome: str
    seq: int


@pytest.fixture
def servers(tmp_path: Path, database_url: str) -> Iterator[list[ServerProcess]]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = {"LEDGER_CONTROL_TOKEN": "control-secret"}
    first = ServerProcess(data_dir=data_dir, database_url=database_url, env=env).start()
    try:
        second = ServerProcess(data_dir=data_dir, database_url=database_url, env=env).start()
        try:
            yield [first, second]
        finally:
            second.stop()
    finally:
        first.stop()


async def all_events(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        page = (await http.get("/v1/events", params={"after": after, "limit": 1000})).json()
        found.extend(page["events"])
        if not page["events"]:
            return found
        after = page["next_after"]


async def test_no_row_sent_after_the_retire_reply_is_ever_recorded(
    servers: list[ServerProcess],
) -> None:
    clients = [httpx.AsyncClient(base_url=s.base_url, timeout=60) for s in servers]
    sent: list[Sent] = []
    retire_replied_at: float | None = None
    after_retire = [0] * WRITERS
    warmed_up = asyncio.Event()

    async def writer(index: int) -> None:
        http = clients[index % len(clients)]
        n = 0
        while after_retire[index] < ROWS_AFTER_RETIRE_PER_WRITER:
            rollout_id = ROLLOUTS[(index + n) % len(ROLLOUTS)]
            model_call_id = f"w{index}-{n}"
            n += 1
            started = time.monotonic()
            reply = await http.post(
                f"/v1/rollouts/{rollout_id}/ledger/rows",
                json=committed_row(rollout_id, model_call_id),
            )
            assert reply.status_code == 200, reply.text
            body = reply.json()
            sent.append(Sent(rollout_id, model_call_id, started, body["outcome"], body["seq"]))
            if len(sent) >= ROWS_BEFORE_RETIRE:
                warmed_up.set()
            if retire_replied_at is not None and started > retire_replied_at:
                after_retire[index] += 1

    try:
        writers = [asyncio.create_task(writer(i)) for i in range(WRITERS)]
        await warmed_up.wait()
        manifests_before = {}
        for rollout_id in ROLLOUTS:
            reply = await clients[1].get(
                f"{CONTROL}/rollouts/{rollout_id}/manifest", headers=CONTROL_HEADERS
            )
            manifests_before[rollout_id] = {r["model_call_id"] for r in reply.json()["records"]}
        retire = await clients[0].post(
            f"{CONTROL}/rollouts/retire", json={"rollout_ids": ROLLOUTS}, headers=CONTROL_HEADERS
        )
        retire_replied_at = time.monotonic()
        assert retire.status_code == 200
        await asyncio.gather(*writers)

        for http in clients:
            for rollout_id in ROLLOUTS:
                gone = await http.get(
                    f"{CONTROL}/rollouts/{rollout_id}/manifest", headers=CONTROL_HEADERS
                )
                assert gone.status_code == 410
        log = await all_events(clients[1])
    finally:
        for http in clients:
            await http.aclose()

    late = [s for s in sent if s.started > retire_replied_at]
    assert len(late) >= WRITERS * ROWS_AFTER_RETIRE_PER_WRITER
    assert {s.outcome for s in late} == {"discarded"}

    fence_seq = {e["rollout_id"]: e["seq"] for e in log if e["kind"] == "rollout.retired"}
    assert sorted(fence_seq) == sorted(ROLLOUTS)
    fates: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for event in log:
        if event["kind"] == "ledger.row_recorded":
            key = (event["rollout_id"], event["payload"]["row"]["model_call_id"])
            fates.setdefault(key, []).append(("recorded", event["seq"]))
        elif event["kind"] == "ledger.row_discarded":
            key = (event["payload"]["rollout_id"], event["payload"]["model_call_id"])
            fates.setdefault(key, []).append(("discarded", event["seq"]))
    # Nothing lost, nothing duplicated: one fate per row sent, and it is the one replied.
    assert len(sent) == len({(s.rollout_id, s.model_call_id) for s in sent})
    assert sorted(fates) == sorted((s.rollout_id, s.model_call_id) for s in sent)
    for s in sent:
        assert fates[(s.rollout_id, s.model_call_id)] == [(s.outcome, s.seq)]
        if s.outcome == "recorded":
            assert s.seq < fence_seq[s.rollout_id]
        else:
            assert s.seq > fence_seq[s.rollout_id]
    recorded = {(s.rollout_id, s.model_call_id) for s in sent if s.outcome == "recorded"}
    for rollout_id, model_call_ids in manifests_before.items():
        assert {(rollout_id, m) for m in model_call_ids} <= recorded
    assert any(s.outcome == "recorded" for s in sent)
