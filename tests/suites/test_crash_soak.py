"""Crash soak (issue 14, standing suites): a real ``ledger serve`` SIGKILLed at seeded random
moments while 16 clients write captures, lineage rows, retires and observations over HTTP.

After each restart, whatever was sent and not acknowledged before the kill is sent again (the
same request: every write route is idempotent on its id). At the end every write is in the
log exactly once, at the seq its acknowledgement named, and ``ledger verify`` and ``ledger
mirror verify`` pass.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.client_connections import client_limits
from tests.lineage.rows import committed_row
from tests.suites.cli import assert_ledger_verifies, mirror_caught_up
from tests.support.exchanges import chat_exchange
from tests.support.server import ServerProcess
from tests.support.stored import stored_calls

pytestmark = pytest.mark.slow

SEED = 14
CYCLES = 30
CLIENTS = 16  # four of each kind
KINDS = ("capture", "row", "observations", "retire")
# The kill comes this long (seconds, drawn from the seeded generator) after the load starts.
KILL_WINDOW = (0.15, 0.9)
CONTROL = "/training-token-capture/control"
CONTROL_TOKEN = "soak-control"
SERVER_ENV = {"LEDGER_CONTROL_TOKEN": CONTROL_TOKEN}


@dataclass(frozen=True)
class Write:
    kind: str
    key: str  # model_call_id, row id, bundle source or retired rollout id
    url: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class SoakLedger:
    sent: dict[str, Write] = field(default_factory=dict)
    acknowledged: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)


def make_write(kind: str, client: str, n: int) -> Write:
    if kind == "capture":
        call_id = f"{client}-{n}"
        rollout_id = f"{client}-r{n % 3}"
        return Write(
            kind,
            call_id,
            f"/v1/rollouts/{rollout_id}/model-calls",
            chat_exchange(model_call_id=call_id, text=f"prompt {n}"),
        )
    if kind == "row":
        rollout_id = f"{client}-rows"
        call_id = f"{client}-{n}"
        return Write(
            kind,
            f"{rollout_id}/{call_id}",
            f"/v1/rollouts/{rollout_id}/ledger/rows",
            committed_row(rollout_id, call_id),
        )
    if kind == "observations":
        source = f"{client}-{n}"
        bundle = {"source": source, "records": [], "gaps": []}
        return Write(
            kind,
            source,
            f"/v1/rollouts/{client}-obs{n % 3}/observations",
            bundle,
            {"Idempotency-Key": source},
        )
    rollout_id = f"{client}-fenced-{n}"
    return Write(
        kind,
        rollout_id,
        f"{CONTROL}/rollouts/retire",
        {"rollout_ids": [rollout_id]},
        {"Authorization": f"Bearer {CONTROL_TOKEN}"},
    )


async def send(http: httpx.AsyncClient, write: Write, record: SoakLedger) -> bool:
    """Send one write; False when the server is gone (the kill)."""
    record.sent[write.key] = write
    try:
        reply = await http.post(write.url, json=write.body, headers=write.headers)
    except httpx.TransportError:
        return False
    if reply.status_code in (200, 201):
        record.acknowledged[write.key] = reply.json()
    else:
        record.refused.append(f"{write.key}: {reply.status_code} {reply.text[:300]}")
    return True


async def writer(base_url: str, kind: str, client: str, record: SoakLedger) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30, limits=client_limits()) as http:
        n = 0
        while await send(http, make_write(kind, client, n), record):
            n += 1


async def resend_unacknowledged(base_url: str, record: SoakLedger) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30, limits=client_limits()) as http:
        for key in [k for k in record.sent if k not in record.acknowledged]:
            assert await send(http, record.sent[key], record), "the server went away"


async def all_events(base_url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=client_limits()) as http:
        while True:
            page = (await http.get("/v1/events", params={"after": after, "limit": 1000})).json()
            if not page["events"]:
                return found
            found.extend(page["events"])
            after = page["next_after"]


async def run_cycle(
    server: ServerProcess, cycle: int, record: SoakLedger, kill_after: float
) -> None:
    await resend_unacknowledged(server.base_url, record)
    writers = [
        asyncio.create_task(writer(server.base_url, KINDS[n % len(KINDS)], f"c{cycle}w{n}", record))
        for n in range(CLIENTS)
    ]
    await asyncio.sleep(kill_after)  # deliberate: the seeded moment of the kill
    server.kill()
    await asyncio.gather(*writers)


def assert_exactly_once(
    record: SoakLedger,
    events: list[dict[str, Any]],
    calls: dict[str, list[tuple[int, int]]],
) -> Counter[str]:
    sent_by_kind = Counter(write.kind for write in record.sent.values())
    # Captures: one stored call per model_call_id, at the acknowledged seq and call_index.
    capture_keys = {k for k, w in record.sent.items() if w.kind == "capture"}
    assert set(calls) == capture_keys, "a capture is missing or unknown"
    for key in capture_keys:
        reply = record.acknowledged[key]
        assert calls[key] == [(reply["seq"], reply["call_index"])], key
    # Rows: one ledger.row_recorded event per row, the one the acknowledgement named.
    rows: dict[str, list[int]] = {}
    observed: dict[str, list[int]] = {}
    retired: Counter[str] = Counter()
    for event in events:
        if event["kind"] == "ledger.row_recorded":
            key = f"{event['rollout_id']}/{event['payload']['row']['model_call_id']}"
            rows.setdefault(key, []).append(event["seq"])
        elif event["kind"] == "observations.recorded":
            observed.setdefault(event["payload"]["bundle"]["source"], []).append(event["seq"])
        elif event["kind"] == "rollout.retired":
            retired[event["rollout_id"]] += 1
    row_keys = {k for k, w in record.sent.items() if w.kind == "row"}
    assert set(rows) == row_keys
    for key in row_keys:
        assert rows[key] == [record.acknowledged[key]["seq"]], key
    observation_keys = {k for k, w in record.sent.items() if w.kind == "observations"}
    assert set(observed) == observation_keys
    for key in observation_keys:
        assert observed[key] == [record.acknowledged[key]["seq"]], key
    retire_keys = {k for k, w in record.sent.items() if w.kind == "retire"}
    assert set(retired) == retire_keys
    assert set(retired.values()) == {1}, "a rollout was fenced twice"
    return sent_by_kind


async def test_sigkill_soak_keeps_every_acknowledged_write_exactly_once(
    tmp_path: Path, database_url: str
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rng = random.Random(SEED)
    record = SoakLedger()
    acknowledged_before_restart = 0
    started = time.monotonic()
    for cycle in range(CYCLES):
        server = ServerProcess(data_dir=data_dir, database_url=database_url, env=SERVER_ENV).start()
        try:
            async with asyncio.timeout(60):
                await run_cycle(server, cycle, record, rng.uniform(*KILL_WINDOW))
        finally:
            server.kill()
        assert server.process is not None and server.process.returncode == -9
        acknowledged_before_restart = len(record.acknowledged)
    with ServerProcess(data_dir=data_dir, database_url=database_url, env=SERVER_ENV) as server:
        await resend_unacknowledged(server.base_url, record)
        await mirror_caught_up(database_url)
        events = await all_events(server.base_url)
    assert record.refused == [], record.refused[:5]
    sent_by_kind = assert_exactly_once(record, events, await stored_calls(database_url))
    print(
        f"soak: {CYCLES} cycles in {time.monotonic() - started:.1f} s, "
        f"{acknowledged_before_restart} writes acknowledged before the kills "
        f"({len(record.acknowledged)} after the final resend), by kind {dict(sent_by_kind)}"
    )
    assert all(sent_by_kind[kind] >= CYCLES for kind in KINDS), sent_by_kind
    assert_ledger_verifies(database_url, data_dir)
