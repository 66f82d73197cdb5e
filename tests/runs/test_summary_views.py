"""The summary views (revision 0011) on both backends: ``rollout_summary``'s attempts and
latest flags follow the health selection's rule, and ``task_summary`` / ``run_summary`` give
the figures ``/v1/perf-summary`` gives for the same selection, and a direct computation over
``rollout_perf`` gives for the resolved counts."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ledger.areas.health.selection import superseded_attempts
from ledger.gym.ids import split_transport_rollout_id
from tests.runs.support import PREFIX, rows, three_runs
from tests.support.health_run import RAISING_CHECK

TOKENS = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")


def _latest(perf_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows the health selection counts, computed in Python (rows in last_seq order)."""
    superseded = superseded_attempts(row["rollout_id"] for row in perf_rows)
    return [row for row in perf_rows if row["rollout_id"] not in superseded]


async def _direct(app: FastAPI) -> dict[str | None, list[dict[str, Any]]]:
    """Per run label, its ``rollout_perf`` rows in last_seq order."""
    found = await rows(
        app,
        "SELECT p.*, l.run_label FROM rollout_perf p LEFT JOIN run_labels l "
        "ON l.rollout_id = p.rollout_id AND l.generation = p.generation ORDER BY p.last_seq",
    )
    runs: dict[str | None, list[dict[str, Any]]] = {}
    for row in found:
        runs.setdefault(row["run_label"], []).append(row)
    return runs


def _selection(run: str | None, task_id: str | None = None) -> dict[str, str]:
    params = {"run": run} if run is not None else {"ids": f"{PREFIX[run]}*"}
    return params if task_id is None else {**params, "task_id": task_id}


def _assert_matches_perf_summary(row: dict[str, Any], answer: dict[str, Any]) -> None:
    counts, perf = answer["selection"], answer["perf_summary"]
    assert row["rollouts"] == counts["matched"]
    assert row["latest_attempts"] == counts["counted"]
    assert row["superseded_attempts"] == counts["superseded_attempts"]
    if perf is None:
        assert row["with_perf"] == 0
        return
    assert row["with_perf"] / row["latest_attempts"] == pytest.approx(
        perf["overall_observability_coverage"]
    )
    for name in TOKENS:
        assert row[name] == perf.get(f"total_{name}"), name
    if "total_latency_mean_ms" in perf:
        assert row["mean_latency_ms"] == pytest.approx(perf["total_latency_mean_ms"])
    else:
        assert row["mean_latency_ms"] is None


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_task_summary_equals_perf_summary_and_a_direct_count(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await three_runs(client)
    direct = await _direct(app)
    tasks = await rows(app, "SELECT * FROM task_summary")
    assert {row["run_label"] for row in tasks} == {"grpo-a", "grpo-b", None}
    for row in tasks:
        if row["task_id"] is None:
            continue  # a rollout without a result: no task to select by
        answer = await client.get(
            "/v1/perf-summary", params=_selection(row["run_label"], row["task_id"])
        )
        _assert_matches_perf_summary(row, answer.json())
        mine = [r for r in direct[row["run_label"]] if r["task_id"] == row["task_id"]]
        latest = _latest(mine)
        with_result = [r for r in latest if r["resolved"] is not None]
        assert row["with_result"] == len(with_result)
        assert row["resolved"] == sum(1 for r in with_result if r["resolved"])
        if with_result:
            assert row["resolved_rate"] == pytest.approx(row["resolved"] / len(with_result))
        else:
            assert row["resolved_rate"] is None
        latencies = [r["total_latency_ms"] for r in latest if r["total_latency_ms"] is not None]
        assert row["min_latency_ms"] == (min(latencies) if latencies else None)
        assert row["max_latency_ms"] == (max(latencies) if latencies else None)
        turns = [r["num_turns"] for r in latest if r["num_turns"] is not None]
        assert row["num_turns"] == (sum(turns) if turns else None)


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_run_summary_equals_perf_summary(client: httpx.AsyncClient, app: FastAPI) -> None:
    runs = await three_runs(client)
    summary = {row["run_label"]: row for row in await rows(app, "SELECT * FROM run_summary")}
    assert set(summary) == set(runs)
    for run, row in summary.items():
        answer = await client.get("/v1/perf-summary", params=_selection(run))
        _assert_matches_perf_summary(row, answer.json())
        tasks = await rows(
            app,
            "SELECT COUNT(DISTINCT task_id) AS n FROM rollout_summary WHERE "
            + ("run_label IS NULL" if run is None else "run_label = :run"),
            run=run,
        )
        assert row["tasks"] == tasks[0]["n"] > 0
        assert isinstance(row["prompt_tokens"], int)
        assert isinstance(row["resolved_rate"], float)


ODD_IDS = ["x-a01", "x-a2", "a-a", "q-a", "9-a12", "t-ab3", "a-a-a3", "z-a0", "n-a7x", "m-a1-a1"]


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_rollout_summary_attempts_follow_the_selection_rule(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await three_runs(client)
    for rollout_id in ODD_IDS:
        body = {"task_id": "odd", "resolved": True}
        answer = await client.post(f"/v1/rollouts/{rollout_id}/result?run=odd", json=body)
        assert answer.status_code == 201, answer.text
    summary = await rows(app, "SELECT * FROM rollout_summary ORDER BY last_seq")
    by_run: dict[str | None, list[dict[str, Any]]] = {}
    for row in summary:
        logical, attempt = split_transport_rollout_id(row["rollout_id"])
        assert (row["logical_rollout_id"], row["attempt"]) == (logical, attempt), row
        by_run.setdefault(row["run_label"], []).append(row)
    assert {row["rollout_id"] for row in by_run["odd"]} == set(ODD_IDS)
    for members in by_run.values():
        superseded = superseded_attempts(row["rollout_id"] for row in members)
        for row in members:
            assert bool(row["latest_attempt"]) is (row["rollout_id"] not in superseded), row
    odd = {row["rollout_id"]: row for row in by_run["odd"]}
    assert superseded_attempts(odd) == {"x-a01", "a-a"}
    assert not odd["x-a01"]["latest_attempt"] and odd["x-a2"]["latest_attempt"]
    assert odd["z-a0"]["attempt"] == 0 and odd["n-a7x"]["attempt"] == 0
    # The API's selection agrees: run "odd" has as many superseded attempts.
    answer = (await client.get("/v1/perf-summary", params={"run": "odd"})).json()
    assert answer["selection"]["superseded_attempts"] == sum(
        not row["latest_attempt"] for row in by_run["odd"]
    )
