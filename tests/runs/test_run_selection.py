"""Selecting by run label in ``/v1/health``, ``/v1/perf-summary`` and the CLI, alone and with
the id glob, the task and the time window, on both backends. Three runs share tasks and Gym
identities; only their labels (and, for the check, their id prefixes) tell them apart."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from fastapi import FastAPI

from ledger.app.cli.main import main
from tests.runs.support import PREFIX, three_runs
from tests.support.health_run import RAISING_CHECK
from tests.support.views import views_caught_up


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def _issues(answer: dict[str, Any], check: str) -> int:
    issues: int = answer["quality_summary"]["run"]["issues"][check]
    return issues


async def _get(client: httpx.AsyncClient, path: str, **params: str) -> dict[str, Any]:
    answer = await client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_a_run_label_selects_exactly_that_runs_rollouts(client: httpx.AsyncClient) -> None:
    runs = await three_runs(client)
    for run in ("grpo-a", "grpo-b"):
        planned = runs[run]
        by_label = await _get(client, "/v1/health", run=run)
        by_glob = await _get(client, "/v1/health", ids=f"{PREFIX[run]}*")
        assert by_label["quality_summary"] == by_glob["quality_summary"]
        selection = by_label["selection"]
        assert isinstance(selection, dict)
        assert selection["run"] == run
        assert selection["matched"] == len(planned)
        assert selection["superseded_attempts"] == sum(p.superseded for p in planned)
        perf = await _get(client, "/v1/perf-summary", run=run)
        assert perf == {
            **await _get(client, "/v1/perf-summary", ids=f"{PREFIX[run]}*"),
            "selection": {**selection, "ids": None},
        }
        summary = await client.get("/v1/health/quality-summary", params={"run": run})
        glob_file = await client.get(
            "/v1/health/quality-summary", params={"ids": f"{PREFIX[run]}*"}
        )
        assert summary.content == glob_file.content
    # Together, the runs' records of one Gym identity are duplicates; within a run they are
    # not (the generated copies aside), which is what the label is for.
    together = await _get(client, "/v1/health")
    apart = await _get(client, "/v1/health", run="grpo-a")
    assert _issues(together, "rollout_duplicate_identity") > _issues(
        apart, "rollout_duplicate_identity"
    )
    none = await _get(client, "/v1/health", run="grpo-z")
    assert none["selection"]["matched"] == 0


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_run_combines_with_glob_task_and_window(client: httpx.AsyncClient) -> None:
    runs = await three_runs(client)
    for params, glob in (
        ({"run": "grpo-a", "ids": "a1*"}, {"ids": "a1*"}),
        ({"run": "grpo-a", "task_id": "task-0"}, {"ids": "a*", "task_id": "task-0"}),
        ({"run": "grpo-b", "attempts": "all"}, {"ids": "b*", "attempts": "all"}),
        ({"run": "grpo-a", "ids": "b*"}, {"ids": "no-such-id"}),
    ):
        labelled = await _get(client, "/v1/health", **params)
        globbed = await _get(client, "/v1/health", **glob)
        assert labelled["quality_summary"] == globbed["quality_summary"], params
        matched = labelled["selection"]["matched"]
        assert matched == globbed["selection"]["matched"], params
        perf = await _get(client, "/v1/perf-summary", **params)
        assert (
            perf["perf_summary"] == (await _get(client, "/v1/perf-summary", **glob))["perf_summary"]
        )
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    window = await _get(client, "/v1/health", run="grpo-a", since=later)
    assert window["selection"]["matched"] == 0
    earlier = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    window = await _get(client, "/v1/health", run="grpo-a", since=earlier, attempts="all")
    assert window["selection"]["matched"] == len(runs["grpo-a"])


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_the_cli_selects_by_run(
    app: FastAPI, client: httpx.AsyncClient, database_url: str
) -> None:
    await three_runs(client)
    await views_caught_up(app)  # the command line reads the views by itself
    base = ["--database-url", database_url]
    health = await asyncio.to_thread(invoke, ["health", "--run", "grpo-b", "--json", *base])
    assert health.exit_code == 0, health.output
    api = await client.get("/v1/health/quality-summary", params={"run": "grpo-b"})
    assert json.loads(health.stdout) == api.json()
    perf = await asyncio.to_thread(
        invoke, ["perf-summary", "b1*", "--run", "grpo-b", "--attempts", "all", *base]
    )
    assert perf.exit_code == 0, perf.output
    answer = await client.get(
        "/v1/perf-summary", params={"ids": "b1*", "run": "grpo-b", "attempts": "all"}
    )
    assert json.loads(perf.stdout.strip().splitlines()[0]) == answer.json()["perf_summary"]
    assert answer.json()["perf_summary"] is not None
    bad = await asyncio.to_thread(invoke, ["health", "--run", "two words", *base])
    assert bad.exit_code == 2
    assert "run label" in bad.output
