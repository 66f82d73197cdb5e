"""The health routes over a generated run, on both backends: one rollout's verdict, the
quality summary of a selection (Gym's files byte for byte), attempts, windows, bad input."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import httpx
import pytest

from ledger.gym.health.facts import record_facts
from ledger.gym.health.summary import summary_bytes, verdict_lines
from ledger.gym.perf_summary import perf_summary
from tests.health.support import expected_report, exported, write_run
from tests.support.health_run import RAISING_CHECK, generate_run

RUN = 60


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_selection_reports_equal_the_rules_over_the_export(
    client: httpx.AsyncClient,
) -> None:
    planned = generate_run(RUN, seed=4)
    await write_run(client, planned)
    lines = await exported(client)
    expected = expected_report(lines)

    every = await client.get("/v1/health", params={"attempts": "all"})
    assert every.status_code == 200, every.text
    assert every.json()["quality_summary"] == expected.summary
    assert every.json()["selection"]["matched"] == len(lines)
    summary_file = await client.get("/v1/health/quality-summary", params={"attempts": "all"})
    assert summary_file.content == summary_bytes(expected.summary)
    verdicts = await client.get("/v1/health/rollout-verdicts", params={"attempts": "all"})
    assert verdicts.content == b"".join(verdict_lines(expected.digests))
    assert verdicts.headers["content-type"].startswith("application/x-ndjson")


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_latest_attempts_leave_superseded_ones_out(client: httpx.AsyncClient) -> None:
    planned = generate_run(RUN, seed=4)
    await write_run(client, planned)
    superseded = {p.rollout_id for p in planned if p.superseded}
    assert superseded
    lines = await exported(client)
    kept = [
        line
        for line in lines
        if json.loads(line)["ng_model_call_capture"]["rollout_id"] not in superseded
    ]
    answer = (await client.get("/v1/health")).json()
    assert answer["selection"]["superseded_attempts"] == len(superseded)
    assert answer["selection"]["counted"] == len(lines) - len(superseded)
    assert answer["quality_summary"] == expected_report(kept).summary
    perf = (await client.get("/v1/perf-summary")).json()
    documents = [json.loads(line).get("ng_perf") for line in kept]
    assert perf["perf_summary"] == perf_summary([d for d in documents if d], len(kept))
    assert perf["selection"]["superseded_attempts"] == len(superseded)


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_id_glob_and_ignored_checks(client: httpx.AsyncClient) -> None:
    await write_run(client, generate_run(RUN, seed=4))
    lines = await exported(client)
    ones = [
        line
        for line in lines
        if json.loads(line)["ng_model_call_capture"]["rollout_id"].startswith("1")
    ]
    answer = await client.get(
        "/v1/health",
        params=[("ids", "1*"), ("attempts", "all"), ("ignore", "model_call_failed,")],
    )
    assert answer.status_code == 200, answer.text
    expected = expected_report(ones, ["model_call_failed"])
    assert answer.json()["quality_summary"] == expected.summary
    assert answer.json()["quality_summary"]["run"]["ignored_checks"] == ["model_call_failed"]
    # LIKE's own wildcard is a literal in a glob: no id has an underscore.
    none = (await client.get("/v1/health", params={"ids": "1_*"})).json()
    assert none["selection"]["matched"] == 0
    assert none["quality_summary"]["run"]["artifacts"]["records"] == 0


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_time_window_on_the_last_event(client: httpx.AsyncClient) -> None:
    first = generate_run(8, seed=1, prefix="early")
    second = generate_run(8, seed=2, prefix="late")
    await write_run(client, first)
    await write_run(client, second)
    times = {}
    for planned in (*first, *second):
        answer = await client.get(f"/v1/rollouts/{planned.rollout_id}")
        if answer.status_code == 200:
            times[planned.rollout_id] = datetime.fromisoformat(answer.json()["updated_at"])
    boundary = min(t for rid, t in times.items() if rid.startswith("late"))
    late = {rid for rid, t in times.items() if t >= boundary}
    assert late and all(rid.startswith("late") for rid in late)
    params = {"since": boundary.isoformat(), "attempts": "all"}
    answer = (await client.get("/v1/health", params=params)).json()
    assert answer["selection"]["matched"] == len(late)
    before = {"until": boundary.isoformat(), "attempts": "all"}
    early = (await client.get("/v1/health", params=before)).json()
    assert early["selection"]["matched"] == len(times) - len(late)
    later = boundary + timedelta(days=1)
    empty = await client.get("/v1/perf-summary", params={"since": later.isoformat()})
    assert empty.json()["perf_summary"] is None


async def test_one_rollouts_health(client: httpx.AsyncClient) -> None:
    body = {
        "model_call_id": "c1",
        "dialect": "responses",
        "model_ref": {"type": "responses_api_models", "name": "policy"},
        "started_at": 1.0,
        "status_code": 500,
        "error_category": "server_error",
        "request": {"input": "q"},
    }
    assert (await client.post("/v1/rollouts/3-0/model-calls", json=body)).status_code == 201
    answer = await client.get("/v1/rollouts/3-0/health")
    assert answer.status_code == 200, answer.text
    health = answer.json()
    assert health["verdict"] == "unhealthy"
    assert health["findings"] == [
        {
            "check": "rollout_ended_on_failed_model_call",
            "subject": {"_ng_task_index": 0, "_ng_rollout_index": 0},
            "locator": {"call_id": "c1"},
            "detail": {
                "model_ref": "responses_api_models/policy",
                "status": 500,
                "error_category": "server_error",
                "observed_calls": 1,
                "successful_calls": 0,
            },
        }
    ]
    # No turns (no producer trajectory), and no call is bound to a turn or an invocation.
    assert health["unobserved"] == [
        "rollout_missing_agent_turns",
        "agent_turn_hollow",
        "model_call_zero_completion_tokens",
        "model_call_missing_token_counts",
        "trajectory_capture_mismatch",
        "model_call_failed",
        "rollout_token_count_mismatch",
        "model_call_runaway_generation",
    ]
    ignored = await client.get(
        "/v1/rollouts/3-0/health", params={"ignore": "rollout_ended_on_failed_model_call"}
    )
    assert ignored.json()["verdict"] == "unobserved"


async def test_bad_input_is_a_clear_4xx(client: httpx.AsyncClient) -> None:
    cases = [
        ("/v1/rollouts/nope/health", {}, 404, "has no record"),
        ("/v1/rollouts/bad%20id/health", {}, 400, "Invalid rollout id"),
        ("/v1/health", {"ignore": "no_such_check"}, 400, "Unknown rollout health check"),
        ("/v1/health", {"ids": "a/b"}, 400, "glob"),
        ("/v1/health", {"ids": "x" * 401}, 422, ""),
        ("/v1/health", {"since": "2026-01-01T00:00:00"}, 400, "time zone"),
        ("/v1/health", {"since": "0001-01-01T00:00:00+00:01"}, 400, "out of range"),
        ("/v1/perf-summary", {"until": "9999-12-31T23:59:59-00:01"}, 400, "out of range"),
        ("/v1/perf-summary", {"since": "yesterday"}, 422, ""),
        ("/v1/perf-summary", {"attempts": "some"}, 422, ""),
        (
            "/v1/health",
            {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
            400,
            "before",
        ),
    ]
    for path, params, status, words in cases:
        answer = await client.get(path, params=params)
        assert answer.status_code == status, (path, params, answer.text)
        assert words in answer.text
        assert len(answer.text) < 2000


async def test_globs_are_case_sensitive_on_both_backends(client: httpx.AsyncClient) -> None:
    for rollout_id in ("Abc-1", "abc-2", "abd-3", "ab"):
        body = {"task_id": "t", "_ng_task_index": 1, "_ng_rollout_index": 0}
        assert (await client.post(f"/v1/rollouts/{rollout_id}/result", json=body)).status_code
    for glob, matched in (("a*", 3), ("abc-*", 1), ("A*", 1), ("ab?-*", 2), ("ab", 1)):
        answer = (await client.get("/v1/health", params={"ids": glob})).json()
        assert answer["selection"]["matched"] == matched, glob


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_stored_trajectories_are_canonical(client: httpx.AsyncClient) -> None:
    """The service skips re-validating a stored ng_trajectory: it is a TrajectoryRecord dump
    already, so validating and dumping it gives it back unchanged."""
    await write_run(client, generate_run(RUN, seed=8))
    lines = await exported(client)
    for ordinal, line in enumerate(lines):
        record = json.loads(line)
        checked = record_facts(record, ordinal)
        assert checked.trajectory_error is None
        assert record_facts(record, ordinal, canonical_trajectory=True) == checked
