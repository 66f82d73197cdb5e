"""The ``call_evidence`` view and the evidence routes on both backends: every call known from a
lineage row, a failure row, an intent or a capture, with which it has; pending within the grace
window, missing after it or at retire, and a capture without a row named; the projection
rebuilt by ``verify`` equals the live one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.log.verify import verify_projections
from tests.cli.support import invoke
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row, failure_row
from tests.runs.support import ledger_of, rows
from tests.support.exchanges import chat_exchange
from tests.support.views import views_caught_up

CONTROL = "/training-token-capture/control"


async def _post_row(client: httpx.AsyncClient, rollout_id: str, row: dict[str, Any]) -> None:
    reply = await client.post(f"/v1/rollouts/{rollout_id}/ledger/rows", json=row)
    assert reply.status_code == 200, reply.text


async def _intents(client: httpx.AsyncClient, rollout_id: str, *ids: str) -> httpx.Response:
    return await client.post(
        f"/v1/rollouts/{rollout_id}/model-calls/intents", json={"model_call_ids": list(ids)}
    )


async def _capture(client: httpx.AsyncClient, rollout_id: str, model_call_id: str) -> None:
    reply = await client.post(
        f"/v1/rollouts/{rollout_id}/model-calls", json=chat_exchange(model_call_id=model_call_id)
    )
    assert reply.status_code == 201, reply.text


async def _view(app: FastAPI, rollout_id: str) -> dict[str, tuple[Any, ...]]:
    found = await rows(
        app,
        "SELECT model_call_id, has_row, has_intent, has_capture, row_kind, admitted, state "
        "FROM call_evidence WHERE rollout_id = :r",
        r=rollout_id,
    )
    return {
        row["model_call_id"]: (
            bool(row["has_row"]),
            bool(row["has_intent"]),
            bool(row["has_capture"]),
            row["row_kind"],
            bool(row["admitted"]),
            row["state"],
        )
        for row in found
    }


async def _evidence(client: httpx.AsyncClient, rollout_id: str) -> dict[str, Any]:
    reply = await client.get(f"/v1/rollouts/{rollout_id}/call-evidence")
    assert reply.status_code == 200, reply.text
    document: dict[str, Any] = reply.json()
    return document


async def _assert_projection_rebuilds(app: FastAPI) -> None:
    await views_caught_up(app)
    store = ledger_of(app).store
    async with store.read() as conn:
        report = await verify_projections(conn, store.catalogue, store.projectors)
    assert report.ok, report.differences


async def test_view_lists_every_call_with_its_evidence(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    root = committed_row("r1", "c1")
    await _post_row(client, "r1", root)
    await _post_row(client, "r1", committed_row("r1", "c2", parent=root))
    await _post_row(client, "r1", failure_row("f1"))
    assert (await _intents(client, "r1", "c1", "c2", "c3", "f1")).status_code == 201
    await _capture(client, "r1", "c1")
    await _capture(client, "r1", "x9")  # a capture the lineage rows never mention
    await _capture(client, "r2", "solo")  # a rollout with captures only

    assert await _view(app, "r1") == {
        "c1": (True, True, True, "call", True, "live"),
        "c2": (True, True, False, "call", True, "live"),
        "c3": (False, True, False, None, True, "live"),
        "f1": (True, True, False, "failure", True, "live"),
        "x9": (False, False, True, None, False, "live"),
    }
    # Within the default grace window the uncaptured calls are pending.
    document = await _evidence(client, "r1")
    assert [call["model_call_id"] for call in document["calls"]] == ["c1", "c2", "f1", "c3", "x9"]
    assert document["findings"] == {
        "model_call_capture_pending": ["c2", "f1", "c3"],
        "model_call_lineage_row_missing": ["x9"],
    }
    assert document["coverage"] == {
        "rollouts": 1,
        "admitted": 4,
        "captured": 1,
        "missing": 0,
        "pending": 3,
        "captures_without_row": 1,
    }
    # No lineage rows at all: a capture alone is nothing to name.
    assert (await _evidence(client, "r2"))["findings"] == {}
    await _assert_projection_rebuilds(app)

    # Retired: nothing is pending any more.
    retired = await client.post(
        f"{CONTROL}/rollouts/retire", json={"rollout_ids": ["r1"]}, headers=CONTROL_HEADERS
    )
    assert retired.status_code == 200, retired.text
    document = await _evidence(client, "r1")
    assert document["state"] == "retired"
    assert document["findings"]["model_call_capture_missing"] == ["c2", "f1", "c3"]
    assert document["coverage"]["missing"] == 3 and document["coverage"]["pending"] == 0


async def test_clear_and_delete(client: httpx.AsyncClient, app: FastAPI) -> None:
    await _post_row(client, "r1", committed_row("r1", "c1"))
    await _capture(client, "r1", "c1")
    await _capture(client, "r1", "x9")
    cleared = await client.delete("/v1/rollouts/r1/model-calls")
    assert cleared.status_code == 200, cleared.text
    # The clear forgets captures; the admitted call stays, the capture-only call goes.
    assert await _view(app, "r1") == {"c1": (True, False, False, "call", True, "live")}
    deleted = await client.post(
        f"{CONTROL}/rollouts/delete", json={"rollout_ids": ["r1"]}, headers=CONTROL_HEADERS
    )
    assert deleted.status_code == 200, deleted.text
    assert await _view(app, "r1") == {}
    await _assert_projection_rebuilds(app)


async def test_intents_route_is_idempotent_and_refuses_bad_bodies(
    client: httpx.AsyncClient,
) -> None:
    first = await _intents(client, "r1", "c1", "c2", "c1")
    assert first.status_code == 201
    assert first.json()["recorded"] == ["c1", "c2"]
    assert first.json()["already_recorded"] == ["c1"]
    again = await _intents(client, "r1", "c2")
    assert again.status_code == 200
    assert again.json() == {
        "rollout_id": "r1",
        "recorded": [],
        "already_recorded": ["c2"],
        "seqs": [],
    }
    bodies: list[Any] = [{"model_call_ids": []}, {"model_call_ids": [""]}, {"ids": ["c1"]}, [1]]
    for body in bodies:
        reply = await client.post("/v1/rollouts/r1/model-calls/intents", json=body)
        assert reply.status_code == 422, (body, reply.text)
        assert len(reply.text) < 2000
    bad_id = await _intents(client, "bad id", "c1")
    assert bad_id.status_code == 400
    missing = await client.get("/v1/rollouts/nobody/call-evidence")
    assert missing.status_code == 404


@pytest.fixture
async def no_grace_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An app whose grace window is 0: an uncaptured call is missing at once."""
    application = create_app(settings.model_copy(update={"capture_grace_s": 0.0}))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http


async def test_after_the_grace_window_an_uncaptured_call_is_missing(
    no_grace_client: httpx.AsyncClient,
) -> None:
    client = no_grace_client
    await _post_row(client, "r1", committed_row("r1", "c1"))
    await _intents(client, "r1", "c1", "c2")
    await _capture(client, "r1", "c1")
    document = await _evidence(client, "r1")
    assert document["grace_s"] == 0.0
    assert document["findings"] == {"model_call_capture_missing": ["c2"]}
    assert document["coverage"]["missing"] == 1 and document["coverage"]["captured"] == 1


async def test_health_routes_metrics_and_the_cli_report_coverage(
    no_grace_client: httpx.AsyncClient, database_url: str
) -> None:
    client = no_grace_client
    # Run a: c1 admitted and captured, c2 admitted only. Run b: an intent only. Unlabelled: a
    # capture without a row on a rollout that has rows.
    await _post_row(client, "1-0", committed_row("1-0", "c1"))
    await _post_row(client, "1-0", committed_row("1-0", "c2"))
    labelled = await client.post(
        "/v1/rollouts/1-0/model-calls",
        params={"run": "run-a"},
        json=chat_exchange(model_call_id="c1"),
    )
    assert labelled.status_code == 201, labelled.text
    await _intents(client, "2-0", "d1")
    await client.post(
        "/v1/rollouts/2-0/model-calls",
        params={"run": "run-b"},
        json=chat_exchange(model_call_id="d1"),
    )
    await _intents(client, "2-0", "d2")
    await _post_row(client, "3-0", committed_row("3-0", "e1"))
    await _capture(client, "3-0", "e1")
    await _capture(client, "3-0", "stray")

    answer = await client.get("/v1/health")
    assert answer.status_code == 200, answer.text
    check = answer.json()["ledger_checks"]["model_call_evidence"]
    assert {k: check[k] for k in ("admitted", "captured", "missing", "pending")} == {
        "admitted": 5,
        "captured": 3,
        "missing": 2,
        "pending": 0,
    }
    assert check["captures_without_row"] == 1
    assert {run["run"]: run["missing"] for run in check["runs"]} == {
        None: 0,
        "run-a": 1,
        "run-b": 1,
    }
    only_a = (await client.get("/v1/health", params={"run": "run-a"})).json()
    assert only_a["ledger_checks"]["model_call_evidence"]["admitted"] == 2
    assert [run["run"] for run in only_a["ledger_checks"]["model_call_evidence"]["runs"]] == [
        "run-a"
    ]

    # A rollout with a record: Gym's verdict and the ledger's check side by side.
    one = (await client.get("/v1/rollouts/1-0/health")).json()
    assert one["verdict"] is not None
    assert one["ledger_checks"]["model_call_evidence"]["findings"] == {
        "model_call_capture_missing": ["c2"]
    }
    # Only a lineage row and no record: Gym's part is null, the ledger's check is there.
    await _post_row(client, "4-0", committed_row("4-0", "f1"))
    four = await client.get("/v1/rollouts/4-0/health")
    assert four.status_code == 200, four.text
    assert four.json()["verdict"] is None
    assert four.json()["ledger_checks"]["model_call_evidence"]["coverage"]["missing"] == 1
    assert (await client.get("/v1/rollouts/nope/health")).status_code == 404

    metrics = (await client.get("/metrics")).text
    assert (
        'ledger_model_calls_by_evidence_finding{kind="model_call_capture_missing"} 3.0' in metrics
    )
    assert (
        'ledger_model_calls_by_evidence_finding{kind="model_call_capture_pending"} 0.0' in metrics
    )
    assert (
        'ledger_model_calls_by_evidence_finding{kind="model_call_lineage_row_missing"} 1.0'
        in metrics
    )

    # ``ledger health``, with its default window (5 s): the same calls are pending there.
    result = await asyncio.to_thread(invoke, database_url, "health", "--run", "run-a")
    assert result.exit_code == 0, result.output
    assert "Call evidence (ledger check, grace 5 s): 2 admitted, 1 captured, 0 missing, " in (
        result.output
    )
