"""``ledger health`` and ``ledger perf-summary`` on both backends: Gym's two files (the same
bytes the API serves), a readable table, clear errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from fastapi import FastAPI

from ledger.app.cli.main import main
from tests.health.support import write_run
from tests.support.health_run import RAISING_CHECK, generate_run
from tests.support.views import views_caught_up


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_health_writes_gyms_files_and_prints_a_table(
    app: FastAPI, client: httpx.AsyncClient, database_url: str, tmp_path: Path
) -> None:
    planned = generate_run(40, seed=9)
    await write_run(client, planned)
    await views_caught_up(app)  # the command line reads the views by itself
    out = tmp_path / "reports" / "run-1"
    args = ["health", "--database-url", database_url, "--output-dir", str(out)]
    result = await asyncio.to_thread(invoke, [*args, "--ignore", "model_call_failed"])
    assert result.exit_code == 0, result.output
    params = {"ignore": "model_call_failed"}
    summary = await client.get("/v1/health/quality-summary", params=params)
    verdicts = await client.get("/v1/health/rollout-verdicts", params=params)
    assert (out / "quality_summary.json").read_bytes() == summary.content
    assert (out / "rollout_verdicts.jsonl").read_bytes() == verdicts.content
    assert not list(out.glob("*.partial"))
    superseded = sum(p.superseded for p in planned)
    run = json.loads(summary.content)["run"]
    assert f"Rollout health: {run['artifacts']['records']} checked" in result.output
    assert f"{superseded} superseded attempts left out" in result.output
    assert "task_no_successful_model_calls" in result.output  # the checks table


async def test_perf_summary_prints_gyms_block(
    app: FastAPI, client: httpx.AsyncClient, database_url: str
) -> None:
    await write_run(client, generate_run(30, seed=9))
    await views_caught_up(app)
    result = await asyncio.to_thread(
        invoke, ["perf-summary", "1*", "--attempts", "all", "--database-url", database_url]
    )
    assert result.exit_code == 0, result.output
    api = await client.get("/v1/perf-summary", params={"ids": "1*", "attempts": "all"})
    printed = result.stdout.strip().splitlines()[0]
    assert json.loads(printed) == api.json()["perf_summary"] is not None


async def test_bad_selection_and_unknown_checks_fail_clearly(database_url: str) -> None:
    base = ["--database-url", database_url]
    unknown = await asyncio.to_thread(invoke, ["health", *base, "--ignore", "nope"])
    assert unknown.exit_code == 1
    assert "Unknown rollout health check(s): nope" in unknown.output
    glob = await asyncio.to_thread(invoke, ["health", "a/b", *base])
    assert glob.exit_code == 2 and "glob" in glob.output
    naive = await asyncio.to_thread(
        invoke, ["perf-summary", *base, "--since", "2026-01-01T00:00:00"]
    )
    assert naive.exit_code == 2
