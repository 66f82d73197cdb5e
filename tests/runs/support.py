"""What the run-label tests read back: the label rows and the events of a rollout."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from sqlalchemy import text

from ledger.app.bootstrap import Ledger


def ledger_of(app: FastAPI) -> Ledger:
    ledger: Ledger = app.state.ledger
    return ledger


async def rows(app: FastAPI, sql: str, **params: Any) -> list[dict[str, Any]]:
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
