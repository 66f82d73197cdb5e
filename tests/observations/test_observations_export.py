"""Export of enriched records: ``GET /v1/export`` and ``ledger export``, on both backends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner, Result
from fastapi import FastAPI

from ledger.app.bootstrap import Ledger
from ledger.app.cli.main import main
from ledger.areas.observations.queries import ExportFilter
from ledger.areas.observations.service import ObservationService
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_RETIRED, RolloutRetired
from tests.observations.support import EXAMPLE_OBSERVATIONS, feed_example, post_ok
from tests.support.views import views_caught_up


def ledger_of(app: FastAPI) -> Ledger:
    ledger: Ledger = app.state.ledger
    return ledger


async def seed(client: httpx.AsyncClient, app: FastAPI) -> dict[str, str]:
    """Three rollouts: 0-0 (task-7), r-b (task t2, retired), r-c (task-7). Returns record texts."""
    await feed_example(client, "0-0")
    await post_ok(client, "/v1/rollouts/r-b/result", {"task_id": "t2"})
    await post_ok(client, "/v1/rollouts/r-c/observations", EXAMPLE_OBSERVATIONS)
    await post_ok(client, "/v1/rollouts/r-c/result", {"task_id": "task-7", "resolved": False})
    await ledger_of(app).store.append(
        NewEvent(ROLLOUT_RETIRED, RolloutRetired(had_rows=False), rollout_id="r-b")
    )
    texts = {}
    for rollout_id in ("0-0", "r-b", "r-c"):
        response = await client.get(f"/v1/rollouts/{rollout_id}/record")
        texts[rollout_id] = response.text
    return texts


async def export(client: httpx.AsyncClient, **params: Any) -> list[str]:
    response = await client.get("/v1/export", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return response.text.splitlines()


async def test_export_streams_every_record_as_stored(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    texts = await seed(client, app)
    lines = await export(client)
    # In the order records last changed: 0-0 (seq 3), r-b (result seq 4), r-c (seq 6).
    assert lines == [texts["0-0"], texts["r-b"], texts["r-c"]]


async def test_export_filters(client: httpx.AsyncClient, app: FastAPI) -> None:
    texts = await seed(client, app)
    assert await export(client, task_id="task-7") == [texts["0-0"], texts["r-c"]]
    assert await export(client, state="live") == [texts["0-0"], texts["r-c"]]
    assert await export(client, state="retired") == [texts["r-b"]]
    assert await export(client, after_seq=3) == [texts["r-b"], texts["r-c"]]
    assert await export(client, after_seq=3, until_seq=4) == [texts["r-b"]]
    assert await export(client, task_id="nobody") == []
    bad = await client.get("/v1/export", params={"state": "gone"})
    assert bad.status_code == 422


async def test_export_view_applies_gyms_export_view(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await seed(client, app)
    records = [json.loads(line) for line in await export(client, view="export", task_id="task-7")]
    assert [("ng_trajectory" in record) for record in records] == [False, False]
    call = records[0]["ng_model_call_capture"]["calls"][0]
    assert call["model_call_id"] == "call-1"
    assert "request" not in call and "response" not in call
    assert records[0]["ng_perf"]["total_latency_ms"] == 910


async def test_export_pages_through_everything_once(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    for index in range(7):
        await post_ok(client, f"/v1/rollouts/p{index}/result", {"task_id": f"t{index}"})
    await views_caught_up(app)
    service = ObservationService(ledger_of(app).store, export_page_size=2)
    lines = [line async for line in service.export_lines(ExportFilter())]
    assert [json.loads(line)["task_id"] for line in lines] == [f"t{index}" for index in range(7)]
    assert await service.count(ExportFilter(after_seq=2)) == 5


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


async def test_cli_export_to_stdout_and_file(
    client: httpx.AsyncClient, app: FastAPI, database_url: str, tmp_path: Path
) -> None:
    texts = await seed(client, app)
    result = await asyncio.to_thread(
        invoke, ["export", "--database-url", database_url, "--task", "task-7"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [texts["0-0"], texts["r-c"]]

    target = tmp_path / "out.jsonl"
    result = await asyncio.to_thread(
        invoke, ["export", "--database-url", database_url, "--view", "export", "-o", str(target)]
    )
    assert result.exit_code == 0, result.output
    exported = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(exported) == 3
    assert all("ng_trajectory" not in record for record in exported)
    assert "exported 3 records" in result.stderr


async def test_cli_export_gym_shard_layout(
    client: httpx.AsyncClient, app: FastAPI, database_url: str, tmp_path: Path
) -> None:
    texts = await seed(client, app)
    run_dir = tmp_path / "runs" / "policy"
    args = [
        "export",
        "--database-url",
        database_url,
        "--layout",
        "gym-shard",
        "--shard",
        "step_000007-w0",
    ]
    result = await asyncio.to_thread(invoke, [*args, "--output", str(run_dir)])
    assert result.exit_code == 0, result.output
    shard = run_dir / "rollouts-step_000007-w0.jsonl"
    assert shard.read_text().splitlines() == list(texts.values())
    # Reopening a shard replaces it.
    result = await asyncio.to_thread(
        invoke, [*args, "--output", str(run_dir), "--state", "retired"]
    )
    assert result.exit_code == 0, result.output
    assert shard.read_text().splitlines() == [texts["r-b"]]
    assert sorted(path.name for path in run_dir.iterdir()) == ["rollouts-step_000007-w0.jsonl"]


async def test_cli_export_refuses_bad_layout_options(database_url: str, tmp_path: Path) -> None:
    base = ["export", "--database-url", database_url]
    missing = await asyncio.to_thread(
        invoke, [*base, "--layout", "gym-shard", "--output", str(tmp_path)]
    )
    assert missing.exit_code == 2
    assert "--layout gym-shard needs --shard NAME and --output DIRECTORY" in missing.output
    bad = await asyncio.to_thread(
        invoke, [*base, "--layout", "gym-shard", "--shard", "../x", "--output", str(tmp_path)]
    )
    assert bad.exit_code == 2
    assert "--shard must be letters, digits" in bad.output
    stray = await asyncio.to_thread(invoke, [*base, "--shard", "x"])
    assert stray.exit_code == 2


async def test_a_task_id_with_control_characters_is_refused_before_the_stream_starts(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    # Found by the standing fuzz: PostgreSQL refuses NUL in a string, and a refusal once the
    # stream had started could only cut it short.
    await seed(client, app)
    for task_id in ("t\x00x", "t\nx", "t\x1fx"):
        response = await client.get("/v1/export", params={"task_id": task_id})
        assert response.status_code == 422, response.text
        assert "task_id" in response.text
        health = await client.get("/v1/health", params={"task_id": task_id})
        assert health.status_code == 422, health.text
    assert await export(client, task_id="task-7") != []
