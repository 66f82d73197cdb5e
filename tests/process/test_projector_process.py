"""The projector process `ledger serve` runs beside itself: it keeps the views current, a read of
a rollout sees its writes through it, and SIGKILLed mid-batch again and again it is started
again and resumes from its checkpoint, nothing lost or applied twice (`ledger verify` clean).
It keeps the JSONL mirror and the health checks too: after the kills the mirror's files match
the database (`ledger mirror verify`) and every record has its findings row."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.suites.cli import ledger_cli
from tests.support.exchanges import chat_exchange
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

KILLS = 30
ROLLOUTS = 8


def projector_pid(server_pid: int) -> int | None:
    """The server's child running the projector, if one runs now."""
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"ledger.app.projector_child" in command:
                return int(child)
    return None


async def new_projector(server_pid: int, other_than: int | None, within_s: float = 60.0) -> int:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        pid = projector_pid(server_pid)
        if pid is not None and pid != other_than:
            return pid
        await asyncio.sleep(0.02)  # poll
    raise AssertionError(f"no projector was started again within {within_s:.0f} s")


async def views(http: httpx.AsyncClient) -> dict[str, int]:
    answer = await http.get("/readyz")
    assert answer.status_code == 200, answer.text
    found: dict[str, int] = answer.json()["views"]
    return found


async def metric(http: httpx.AsyncClient, name: str) -> float:
    answer = await http.get("/metrics")
    assert answer.status_code == 200, answer.text
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in answer.text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    ]
    assert values, f"{name} is not in /metrics"
    return sum(values)


async def test_sigkilled_projector_resumes_with_nothing_lost_or_doubled(
    tmp_path: Path, database_url: str
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = ServerProcess(
        data_dir=data_dir, database_url=database_url, env={"LEDGER_PROJECTOR": "process"}
    )
    server.start()
    assert server.process is not None
    sent: dict[str, list[str]] = {f"p{n}": [] for n in range(ROLLOUTS)}
    stop = asyncio.Event()

    async def append(http: httpx.AsyncClient) -> None:
        k = 0
        while not stop.is_set():
            items = []
            for rollout_id, ids in sent.items():
                model_call_id = f"{rollout_id}-c{k}"
                items.append(
                    {
                        "rollout_id": rollout_id,
                        "exchange": chat_exchange(model_call_id=model_call_id),
                    }
                )
                ids.append(model_call_id)
            answer = await http.post("/v1/model-calls/batch", json={"items": items})
            assert answer.status_code == 200, answer.text
            assert {r["status"] for r in answer.json()["results"]} == {201}
            k += 1
            # Paced: the log keeps growing under the projector without a backlog it could
            # not apply between two kills on a loaded machine.
            await asyncio.sleep(0.02)  # poll: a deliberate pause (pacing)

    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            appending = asyncio.create_task(append(http))
            pid = await new_projector(server.process.pid, None)
            for _ in range(KILLS):
                before = (await views(http))["projected_seq"]
                # Killed while it applies: the log grows under it all along.
                deadline = time.monotonic() + 30
                while (await views(http))["projected_seq"] == before:
                    assert time.monotonic() < deadline, "the projector made no progress"
                    await asyncio.sleep(0.01)  # poll
                os.kill(pid, signal.SIGKILL)
                pid = await new_projector(server.process.pid, pid)
            stop.set()
            await appending
            progress = await views(http)
            deadline = time.monotonic() + 120
            while progress["behind"]:
                assert time.monotonic() < deadline, progress
                await asyncio.sleep(0.05)  # poll
                progress = await views(http)
            # Every capture once, in order, through the last projector.
            for rollout_id, ids in sent.items():
                record = await http.get(f"/v1/rollouts/{rollout_id}/record")
                assert record.status_code == 200, record.text
                calls = record.json()["ng_model_call_capture"]["calls"]
                assert [call["model_call_id"] for call in calls] == ids
            # The mirror and the health checks, killed with it, caught up too; the server
            # runs neither (it reads their progress from the database).
            deadline = time.monotonic() + 120
            while not (
                await metric(http, "ledger_mirror_lag_events") == 0
                and await metric(http, "ledger_health_findings_behind_rollouts") == 0
                and await metric(http, "ledger_rollouts_by_verdict") == ROLLOUTS
            ):
                assert time.monotonic() < deadline, "the mirror or the health checks lag"
                await asyncio.sleep(0.2)  # poll: the server reads the verdict gauges every 5 s
    finally:
        server.stop()
    verified = await asyncio.to_thread(ledger_cli, database_url, data_dir, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "ok   projections" in verified.stdout
    # Nothing was left for verify to apply: the projector had applied every event once.
    assert "brought to the head" not in verified.stdout
    mirrored = await asyncio.to_thread(ledger_cli, database_url, data_dir, "mirror", "verify")
    assert mirrored.returncode == 0, mirrored.stdout + mirrored.stderr
    assert "ok   the mirror matches the database" in mirrored.stdout


async def test_a_read_that_waits_asks_the_projector_process_to_look_at_once(
    tmp_path: Path, database_url: str
) -> None:
    """The projector looks at the log every LEDGER_VIEWS_LOOK_EVERY_S; a read of a rollout
    that must wait for the views asks it, over the projector's standard input, to look now.
    With a look a minute and reads that wait half of that, a read after each append is
    still answered: each one asked.
    """
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = ServerProcess(
        data_dir=data_dir,
        database_url=database_url,
        env={
            "LEDGER_PROJECTOR": "process",
            "LEDGER_VIEWS_LOOK_EVERY_S": "60",
            "LEDGER_VIEWS_WAIT_S": "30",
        },
    )
    server.start()
    assert server.process is not None
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            await new_projector(server.process.pid, None)
            for n in range(3):
                model_call_id = f"c{n}"
                answer = await http.post(
                    "/v1/rollouts/r1/model-calls", json=chat_exchange(model_call_id=model_call_id)
                )
                assert answer.status_code == 201, answer.text
                record = await http.get("/v1/rollouts/r1/record")
                assert record.status_code == 200, record.text
                calls = record.json()["ng_model_call_capture"]["calls"]
                assert [call["model_call_id"] for call in calls] == [f"c{k}" for k in range(n + 1)]
    finally:
        server.stop()
