"""``?run=LABEL`` on the ingest routes, on both backends: the label and the evidence commit
together, a generation is labelled once (a different label is a 409 that appends nothing), a
delete ends the label with the generation, bad labels are 422 naming ``run``, and the other
kinds' payloads are byte for byte what they are without a label."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from ledger.app.areas import default_projectors
from ledger.areas.runs.labels import RUN_LABEL_PATTERN
from ledger.log.verify import verify_projections
from tests.conftest import CONTROL_HEADERS
from tests.observations.support import (
    EXAMPLE_OBSERVATIONS,
    EXAMPLE_RESULT,
    exchange,
)
from tests.runs.support import kinds, labelled_payloads, labels, ledger_of, rows
from tests.support.views import views_caught_up

BATCH = "/v1/model-calls/batch"


async def test_a_capture_labels_its_rollout_once(client: httpx.AsyncClient, app: FastAPI) -> None:
    first = await client.post("/v1/rollouts/r1/model-calls?run=grpo-7", json=exchange("c1"))
    assert first.status_code == 201, first.text
    again = await client.post("/v1/rollouts/r1/model-calls?run=grpo-7", json=exchange("c2"))
    assert again.status_code == 201, again.text
    # A repeat of the same exchange with the same label changes nothing.
    repeat = await client.post("/v1/rollouts/r1/model-calls?run=grpo-7", json=exchange("c2"))
    assert repeat.status_code == 200, repeat.text
    # No label says nothing about the run.
    plain = await client.post("/v1/rollouts/r1/model-calls", json=exchange("c3"))
    assert plain.status_code == 201, plain.text
    assert await kinds(app, "r1") == [
        "model_call.captured",
        "rollout.labelled",
        "model_call.captured",
        "model_call.captured",
    ]
    assert await labels(app) == {"r1": ("grpo-7", 0)}
    assert await labelled_payloads(app) == [{"run": "grpo-7"}]


async def test_a_different_label_is_refused_and_appends_nothing(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await client.post("/v1/rollouts/r1/result?run=run-a", json=EXAMPLE_RESULT)
    before = await kinds(app, "r1")
    for path, body in (
        ("/v1/rollouts/r1/model-calls?run=run-b", exchange("c1")),
        ("/v1/rollouts/r1/observations?run=run-b", EXAMPLE_OBSERVATIONS),
        ("/v1/rollouts/r1/result?run=run-b", EXAMPLE_RESULT),
    ):
        answer = await client.post(path, json=body)
        assert answer.status_code == 409, (path, answer.text)
        detail = answer.json()["detail"]
        assert "run-a" in detail and "run-b" in detail, detail
    assert await kinds(app, "r1") == before == ["rollout.result_recorded", "rollout.labelled"]
    assert await labels(app) == {"r1": ("run-a", 0)}
    # The label it holds is accepted on every route.
    for path, body in (
        ("/v1/rollouts/r1/model-calls?run=run-a", exchange("c1")),
        ("/v1/rollouts/r1/observations?run=run-a", EXAMPLE_OBSERVATIONS),
    ):
        answer = await client.post(path, json=body)
        assert answer.status_code == 201, (path, answer.text)
    assert (await kinds(app, "r1"))[2:] == ["model_call.captured", "observations.recorded"]


async def test_an_idempotent_repeat_still_labels_and_still_refuses(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    headers = {"Idempotency-Key": "k1"}
    first = await client.post("/v1/rollouts/r1/result", json=EXAMPLE_RESULT, headers=headers)
    assert first.status_code == 201
    labelled = await client.post(
        "/v1/rollouts/r1/result?run=late", json=EXAMPLE_RESULT, headers=headers
    )
    assert labelled.status_code == 200, labelled.text
    assert labelled.json()["seq"] == first.json()["seq"]
    assert await labels(app) == {"r1": ("late", 0)}
    other = await client.post(
        "/v1/rollouts/r1/result?run=other", json=EXAMPLE_RESULT, headers=headers
    )
    assert other.status_code == 409


async def test_a_refused_capture_labels_nothing(client: httpx.AsyncClient, app: FastAPI) -> None:
    assert (await client.post("/v1/rollouts/r1/model-calls", json=exchange("c1"))).status_code
    changed = exchange("c1", latency_ms=1.0)
    answer = await client.post("/v1/rollouts/r1/model-calls?run=run-a", json=changed)
    assert answer.status_code == 409, answer.text
    assert await labels(app) == {}
    assert await kinds(app, "r1") == ["model_call.captured"]


async def test_batch_items_are_labelled_and_refused_one_by_one(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await client.post("/v1/rollouts/taken/model-calls?run=run-a", json=exchange("t0"))
    await client.post("/v1/rollouts/clash/model-calls", json=exchange("x1"))
    items = [
        {"rollout_id": "fresh", "exchange": exchange("f1")},
        {"rollout_id": "taken", "exchange": exchange("t1")},
        {"rollout_id": "fresh", "exchange": exchange("f2")},
        # Its only item conflicts (same id, other exchange): the rollout stays unlabelled.
        {"rollout_id": "clash", "exchange": exchange("x1", latency_ms=2.0)},
        {"rollout_id": "bad id!", "exchange": exchange("b1")},
    ]
    answer = await client.post(f"{BATCH}?run=run-b", json={"items": items})
    assert answer.status_code == 200, answer.text
    statuses = [result["status"] for result in answer.json()["results"]]
    assert statuses == [201, 409, 201, 409, 400]
    assert "run-a" in answer.json()["results"][1]["detail"]
    assert await labels(app) == {"taken": ("run-a", 0), "fresh": ("run-b", 0)}
    assert await kinds(app, "fresh") == [
        "model_call.captured",
        "rollout.labelled",
        "model_call.captured",
    ]
    assert await kinds(app, "taken") == ["model_call.captured", "rollout.labelled"]
    assert await kinds(app, "clash") == ["model_call.captured"]


async def test_bad_labels_are_422_naming_run(client: httpx.AsyncClient, app: FastAPI) -> None:
    bad = ["", "two words", "x" * 201, "caf\u00e9", "tab\there", "nul\x00"]
    for label in bad:
        for method, path, body in (
            ("POST", "/v1/rollouts/r1/model-calls", exchange("c1")),
            ("POST", BATCH, {"items": [{"rollout_id": "r1", "exchange": exchange("c1")}]}),
            ("POST", "/v1/rollouts/r1/observations", EXAMPLE_OBSERVATIONS),
            ("POST", "/v1/rollouts/r1/result", EXAMPLE_RESULT),
            ("GET", "/v1/health", None),
            ("GET", "/v1/perf-summary", None),
        ):
            answer = await client.request(method, path, params={"run": label}, json=body)
            assert answer.status_code == 422, (label, path, answer.text)
            assert "run" in answer.text, answer.text
    assert await rows(app, "SELECT seq FROM events") == []
    longest = "x" * 200
    answer = await client.post(f"/v1/rollouts/r1/model-calls?run={longest}", json=exchange("c1"))
    assert answer.status_code == 201
    assert await labels(app) == {"r1": (longest, 0)}


async def test_a_delete_ends_the_label_with_the_generation(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await client.post("/v1/rollouts/r1/model-calls?run=run-a", json=exchange("c1"))
    removed = await client.post(
        "/training-token-capture/control/rollouts/delete",
        json={"rollout_ids": ["r1"]},
        headers=CONTROL_HEADERS,
    )
    assert removed.status_code == 200, removed.text
    assert await labels(app) == {}
    reused = await client.post("/v1/rollouts/r1/model-calls?run=run-b", json=exchange("c1"))
    assert reused.status_code == 201, reused.text
    assert await labels(app) == {"r1": ("run-b", 1)}


async def test_labels_leave_the_other_payloads_as_they_were(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    """The same evidence with and without a label: identical payload bytes for every kind."""
    for rollout, query in (("plain", ""), ("labelled", "?run=run-a")):
        for what, body in (
            ("model-calls", exchange("c1")),
            ("observations", EXAMPLE_OBSERVATIONS),
            ("result", EXAMPLE_RESULT),
        ):
            answer = await client.post(f"/v1/rollouts/{rollout}/{what}{query}", json=body)
            assert answer.status_code == 201, answer.text
    stored = await rows(
        app,
        "SELECT rollout_id, kind, payload_sha256 FROM events "
        "WHERE kind <> 'rollout.labelled' ORDER BY seq",
    )
    by_rollout: dict[str, list[tuple[str, str]]] = {}
    for row in stored:
        by_rollout.setdefault(row["rollout_id"], []).append((row["kind"], row["payload_sha256"]))
    assert by_rollout["plain"] == by_rollout["labelled"]
    plain = await client.get("/v1/rollouts/plain/record")
    labelled = await client.get("/v1/rollouts/labelled/record")
    assert plain.content.replace(b"plain", b"labelled") == labelled.content


async def test_verify_rebuilds_the_labels(client: httpx.AsyncClient, app: FastAPI) -> None:
    await client.post("/v1/rollouts/r1/model-calls?run=run-a", json=exchange("c1"))
    await client.post("/v1/rollouts/r2/result?run=run-b", json=EXAMPLE_RESULT)
    await client.post(
        "/training-token-capture/control/rollouts/delete",
        json={"rollout_ids": ["r1"]},
        headers=CONTROL_HEADERS,
    )
    await client.post("/v1/rollouts/r1/observations?run=run-c", json=EXAMPLE_OBSERVATIONS)
    await views_caught_up(app)
    ledger = ledger_of(app)
    async with ledger.store.read() as conn:
        # Fresh projectors: the live ones belong to the running writer.
        report = await verify_projections(conn, ledger.store.catalogue, default_projectors())
    assert report.ok, report.differences
    assert await labels(app) == {"r1": ("run-c", 1), "r2": ("run-b", 0)}


async def test_a_retired_rollout_can_still_be_labelled(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await client.post("/v1/rollouts/r1/model-calls", json=exchange("c1"))
    retired = await client.post(
        "/training-token-capture/control/rollouts/retire",
        json={"rollout_ids": ["r1"]},
        headers=CONTROL_HEADERS,
    )
    assert retired.status_code == 200, retired.text
    answer = await client.post("/v1/rollouts/r1/result?run=run-a", json=EXAMPLE_RESULT)
    assert answer.status_code == 201, answer.text
    assert await labels(app) == {"r1": ("run-a", 0)}


async def test_openapi_documents_run(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    for method, path in (
        ("post", "/v1/rollouts/{rollout_id}/model-calls"),
        ("post", "/v1/model-calls/batch"),
        ("post", "/v1/rollouts/{rollout_id}/observations"),
        ("post", "/v1/rollouts/{rollout_id}/result"),
        ("get", "/v1/health"),
        ("get", "/v1/health/quality-summary"),
        ("get", "/v1/health/rollout-verdicts"),
        ("get", "/v1/perf-summary"),
    ):
        parameters = {p["name"]: p for p in schema["paths"][path][method]["parameters"]}
        run = parameters["run"]
        assert run["in"] == "query" and not run.get("required", False), path
        string = run["schema"]["anyOf"][0]
        assert string["pattern"] == RUN_LABEL_PATTERN, path
        assert (string["minLength"], string["maxLength"]) == (1, 200), path
        assert "run" in run["description"].lower(), path
