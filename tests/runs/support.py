"""What the run-label tests read back: the label rows and the events of a rollout."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import text

from ledger.app.bootstrap import Ledger
from tests.support.health_run import PlannedRollout, generate_run, interleaved_posts
from tests.support.views import views_caught_up


def ledger_of(app: FastAPI) -> Ledger:
    ledger: Ledger = app.state.ledger
    return ledger


async def rows(app: FastAPI, sql: str, **params: Any) -> list[dict[str, Any]]:
    await views_caught_up(app)  # the projections show what the client wrote
    async with ledger_of(app).store.read() as conn:
        result = await conn.execute(text(sql), params)
        return [dict(row._mapping) for row in result]


async def labels(app: FastAPI) -> dict[str, tuple[str, int]]:
    """rollout id -> (run label, generation), from the projection."""
    found = await rows(app, "SELECT rollout_id, generation, run_label FROM run_labels")
    return {row["rollout_id"]: (row["run_label"], row["generation"]) for row in found}


async def kinds(app: FastAPI, rollout_id: str) -> list[str]:
    found = await rows(
        app, "SELECT kind FROM events WHERE rollout_id = :r ORDER BY seq", r=rollout_id
    )
    return [row["kind"] for row in found]


async def labelled_payloads(app: FastAPI) -> list[dict[str, Any]]:
    found = await rows(
        app, "SELECT payload FROM events WHERE kind = 'rollout.labelled' ORDER BY seq"
    )
    return [json.loads(row["payload"]) for row in found]


async def write_labelled(
    client: httpx.AsyncClient, planned: list[PlannedRollout], run: str | None
) -> None:
    """A generated run written as a live run writes it, every post naming ``run``."""
    query = "" if run is None else f"?run={run}"
    for path, body in interleaved_posts(planned, seed=3):
        answer = await client.post(path + query, json=body)
        assert answer.status_code in (200, 201), f"{path}: {answer.text}"


async def three_runs(client: httpx.AsyncClient) -> dict[str | None, list[PlannedRollout]]:
    """Runs ``grpo-a`` and ``grpo-b`` (labelled) and one without a label, on the same tasks
    and Gym identities (only the id prefix tells them apart)."""
    runs: dict[str | None, list[PlannedRollout]] = {
        "grpo-a": generate_run(40, seed=4, prefix="a"),
        "grpo-b": generate_run(30, seed=5, prefix="b"),
        None: generate_run(20, seed=6, prefix="c"),
    }
    for run, planned in runs.items():
        await write_labelled(client, planned, run)
    return runs


PREFIX = {"grpo-a": "a", "grpo-b": "b", None: "c"}
