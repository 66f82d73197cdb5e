"""The materialized views on both backends: lifecycle, ``ledger verify``, and the SQL views."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import text

from ledger.app.areas import default_projectors
from ledger.app.bootstrap import Ledger
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED, RolloutDeleted
from ledger.log.verify import verify_projections
from tests.observations.support import (
    EXAMPLE_OBSERVATIONS,
    EXAMPLE_RESULT,
    exchange,
    feed_example,
    get_record,
    post_ok,
)
from tests.support.views import views_caught_up


def ledger_of(app: FastAPI) -> Ledger:
    ledger: Ledger = app.state.ledger
    return ledger


def tool(
    tool_call_id: str, started_at: float | None, completed_at: float | None, **fields: Any
) -> dict[str, Any]:
    return {
        "kind": "tool_call",
        "invocation_id": "root",
        "tool_call_id": tool_call_id,
        "started_at": started_at,
        "completed_at": completed_at,
        **fields,
    }


PARALLEL_BUNDLE = {
    "source": "agent",
    "records": [
        {
            "kind": "agent_invocation",
            "invocation_id": "root",
            "model_calls": [{"model_call_id": "c1"}, {"model_call_id": "missing"}],
            "conversation": [{"type": "function_call_output", "call_id": "a", "output": "A"}],
        },
        tool("a", 10.0, 12.0, status="completed"),  # overlaps b
        tool("b", 11.0, 11.5, status="failed", duration_ms=400),  # overlaps a
        tool("c", 20.0, 21.0),  # alone
        tool("d", None, None),  # no timing
    ],
    "gaps": [{"code": "tool_timing_unavailable", "invocation_id": "root", "detail": "d"}],
}


async def rows(app: FastAPI, sql: str) -> list[dict[str, Any]]:
    await views_caught_up(app)  # the SQL views show what the client wrote
    async with ledger_of(app).store.read() as conn:
        result = await conn.execute(text(sql))
        return [dict(row._mapping) for row in result]


async def test_sql_views_show_perf_tool_intervals_and_gaps(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await post_ok(client, "/v1/rollouts/r1/model-calls", exchange("c1"))
    await post_ok(client, "/v1/rollouts/r1/observations", PARALLEL_BUNDLE)
    await post_ok(
        client, "/v1/rollouts/r1/result", {"task_id": "t9", "resolved": True, "latency_ms": 77.5}
    )

    perf = await rows(app, "SELECT * FROM rollout_perf")
    assert len(perf) == 1
    row = perf[0]
    assert (row["rollout_id"], row["task_id"], bool(row["resolved"])) == ("r1", "t9", True)
    assert bool(row["has_trajectory"]) and not bool(row["projection_failed"])
    assert (
        row["num_invocations"],
        row["num_model_calls"],
        row["num_turns"],
        row["num_tool_calls"],
    ) == (1, 1, 1, 4)
    assert row["token_observability_coverage"] == 1.0
    assert (row["prompt_tokens"], row["completion_tokens"], row["cached_prompt_tokens"]) == (
        12,
        8,
        None,
    )
    assert row["total_latency_ms"] == 77.5
    assert (row["gap_count"], row["join_gap_count"], row["capture_gap_count"]) == (3, 1, 0)

    tools = await rows(
        app,
        "SELECT tool_call_id, status, started_at, completed_at, duration_ms, reported_duration_ms,"
        " concurrent_tool_calls FROM rollout_tool_calls ORDER BY position",
    )
    assert tools == [
        {
            "tool_call_id": "a",
            "status": "completed",
            "started_at": 10.0,
            "completed_at": 12.0,
            "duration_ms": 2000.0,
            "reported_duration_ms": None,
            "concurrent_tool_calls": 1,
        },
        {
            "tool_call_id": "b",
            "status": "failed",
            "started_at": 11.0,
            "completed_at": 11.5,
            "duration_ms": 400.0,
            "reported_duration_ms": 400.0,
            "concurrent_tool_calls": 1,
        },
        {
            "tool_call_id": "c",
            "status": "unknown",
            "started_at": 20.0,
            "completed_at": 21.0,
            "duration_ms": 1000.0,
            "reported_duration_ms": None,
            "concurrent_tool_calls": 0,
        },
        {
            "tool_call_id": "d",
            "status": "unknown",
            "started_at": None,
            "completed_at": None,
            "duration_ms": None,
            "reported_duration_ms": None,
            "concurrent_tool_calls": 0,
        },
    ]

    gaps = await rows(
        app, "SELECT document, code, invocation_id, detail FROM rollout_gaps ORDER BY position"
    )
    assert gaps == [
        {
            "document": "ng_trajectory",
            "code": "tool_timing_unavailable",
            "invocation_id": "root",
            "detail": "d",
        },
        {
            "document": "ng_trajectory",
            "code": "model_call_reference_unmatched",
            "invocation_id": "root",
            "detail": "missing",
        },
        {
            "document": "ng_trajectory",
            "code": "turns_unavailable",
            "invocation_id": None,
            "detail": None,
        },
    ]


async def test_failed_projection_gaps_are_listed_from_the_capture(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    # The agent saw "d" complete at 1.0; the producer saw it start at 5.0: each valid alone,
    # merged invalid, so the projection fails and the gaps stay on capture and observations.
    bundle = {**PARALLEL_BUNDLE, "records": [*PARALLEL_BUNDLE["records"][:4], tool("d", None, 1.0)]}
    producer = {"task_id": "t9", "rollout_id": "r1", "tool_calls": [tool("d", 5.0, None)]}
    await post_ok(client, "/v1/rollouts/r1/model-calls", exchange("c1"))
    await post_ok(client, "/v1/rollouts/r1/observations", bundle)
    await post_ok(client, "/v1/rollouts/r1/result", {"task_id": "t9", "ng_trajectory": producer})
    perf = await rows(app, "SELECT has_trajectory, projection_failed, num_turns FROM rollout_perf")
    assert [
        (bool(r["has_trajectory"]), bool(r["projection_failed"]), r["num_turns"]) for r in perf
    ] == [(False, True, None)]
    gaps = await rows(app, "SELECT document, code, detail FROM rollout_gaps ORDER BY position")
    assert gaps == [
        {
            "document": "ng_model_call_capture",
            "code": "trajectory_projection_failed",
            "detail": "ValidationError",
        },
        {"document": "ng_agent_observations", "code": "tool_timing_unavailable", "detail": "d"},
        {
            "document": "ng_agent_observations",
            "code": "model_call_reference_unmatched",
            "detail": "missing",
        },
    ]
    assert await rows(app, "SELECT * FROM rollout_tool_calls") == []


async def test_delete_ends_the_generation_and_clear_forgets_calls(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    ledger = ledger_of(app)
    await feed_example(client, "0-0")
    await post_ok(
        client,
        "/v1/rollouts/0-0/model-calls",
        exchange("call-2", call_index=None) if False else exchange("call-2"),
    )

    await ledger.captures.clear("0-0")
    cleared = await get_record(client, "0-0")
    assert cleared["ng_model_call_capture"]["calls"] == []
    assert cleared["ng_agent_observations"]["source"] == "example_agent"  # the bundle stays
    assert cleared["ng_agent_observations"]["gaps"] == [
        {
            "code": "model_call_reference_unmatched",
            "invocation_id": "root",
            "detail": "call-1",
        }
    ]

    await ledger.store.append(
        NewEvent(ROLLOUT_DELETED, RolloutDeleted(had_rows=False), rollout_id="0-0")
    )
    response = await client.get("/v1/rollouts/0-0/record")
    assert response.status_code == 404

    # The id is reused: nothing of the old generation carries over.
    await post_ok(client, "/v1/rollouts/0-0/result", EXAMPLE_RESULT)
    reused = await get_record(client, "0-0")
    assert "ng_agent_observations" not in reused
    assert reused["ng_model_call_capture"]["calls"] == []


async def test_verify_rebuilds_identical_projections(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    ledger = ledger_of(app)
    await feed_example(client, "0-0")
    await post_ok(client, "/v1/rollouts/r1/model-calls", exchange("c1"))
    await post_ok(client, "/v1/rollouts/r1/observations", PARALLEL_BUNDLE)
    await post_ok(client, "/v1/rollouts/r1/observations", EXAMPLE_OBSERVATIONS)
    await post_ok(client, "/v1/rollouts/r2/model-calls", exchange("c9"))
    await ledger.captures.clear("r2")
    await post_ok(client, "/v1/rollouts/r2/model-calls", exchange("c10"))
    await ledger.store.append(
        NewEvent(ROLLOUT_DELETED, RolloutDeleted(had_rows=True), rollout_id="r1")
    )
    await post_ok(client, "/v1/rollouts/r1/result", {"task_id": "again"})
    await views_caught_up(app)

    async with ledger.store.read() as conn:
        # Fresh projectors: the running store's keep state its writer (and the health
        # follower's writes through it) may be using meanwhile.
        report = await verify_projections(conn, ledger.store.catalogue, default_projectors())
    assert report.ok, report.differences
    count = await rows(app, "SELECT COUNT(*) AS n FROM observation_records")
    assert count == [{"n": 2 + 0 + 1}]


async def test_concurrent_writes_end_in_the_same_record_as_a_rebuild(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    """Captures, bundles and results racing for three rollouts: every write lands, the views
    agree with a rebuild from the log, and each record reflects all of its calls."""
    bundle = {
        "source": "agent",
        "records": [
            {
                "kind": "agent_invocation",
                "invocation_id": "root",
                "model_calls": [{"model_call_id": f"c{n}"} for n in range(10)],
                "conversation": [{"type": "message", "role": "user", "content": "q"}],
            }
        ],
    }
    writes = []
    for rollout in ("a", "b", "c"):
        writes += [
            post_ok(client, f"/v1/rollouts/{rollout}/model-calls", exchange(f"c{n}"))
            for n in range(10)
        ]
        writes.append(post_ok(client, f"/v1/rollouts/{rollout}/observations", bundle))
        writes.append(post_ok(client, f"/v1/rollouts/{rollout}/result", {"task_id": rollout}))
    await asyncio.gather(*writes)

    for rollout in ("a", "b", "c"):
        record = await get_record(client, rollout)
        assert record["ng_model_call_capture"]["metrics"]["num_calls"] == 10
        assert record["ng_agent_observations"]["gaps"] == []
        assert record["ng_perf"]["num_turns"] == 10
        assert record["ng_perf"]["token_observability_coverage"] == 1.0
    ledger = ledger_of(app)
    async with ledger.store.read() as conn:
        # Fresh projectors: the running store's keep state its writer (and the health
        # follower's writes through it) may be using meanwhile.
        report = await verify_projections(conn, ledger.store.catalogue, default_projectors())
    assert report.ok, report.differences
