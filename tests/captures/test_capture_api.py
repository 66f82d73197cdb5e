"""The capture write and read API over HTTP (in-process app), on every backend."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.gym.capture_attachment import build_capture_attachment, capture_gaps
from ledger.gym.model_calls import build_model_call_record
from tests.support.exchanges import (
    chat_exchange,
    failed_exchange,
    messages_exchange,
    responses_exchange,
)


async def _append(client: httpx.AsyncClient, rollout_id: str, exchange: Any) -> httpx.Response:
    return await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=exchange)


async def test_append_assigns_positions_and_replies_after_commit(
    client: httpx.AsyncClient,
) -> None:
    first = await _append(client, "r1", chat_exchange(model_call_id="call-a"))
    second = await _append(client, "r1", responses_exchange(model_call_id="call-b"))
    other = await _append(client, "r2", messages_exchange(model_call_id="call-a"))
    assert first.status_code == 201, first.text
    assert first.json() == {
        "rollout_id": "r1",
        "model_call_id": "call-a",
        "call_index": 0,
        "seq": 1,
    }
    assert second.json()["call_index"] == 1
    assert other.status_code == 201 and other.json()["call_index"] == 0
    events = (await client.get("/v1/events")).json()["events"]
    assert [e["kind"] for e in events] == ["model_call.captured"] * 3
    assert events[0]["payload"]["exchange"] == chat_exchange(model_call_id="call-a")


async def test_server_assigns_model_call_id_when_absent(client: httpx.AsyncClient) -> None:
    exchange = chat_exchange()
    del exchange["model_call_id"]
    reply = await _append(client, "r1", exchange)
    assert reply.status_code == 201
    assigned = reply.json()["model_call_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", assigned)
    calls = (await client.get("/v1/rollouts/r1/model-calls")).json()["calls"]
    assert [c["model_call_id"] for c in calls] == [assigned]


async def test_same_exchange_is_idempotent_and_different_one_conflicts(
    client: httpx.AsyncClient,
) -> None:
    exchange = chat_exchange(model_call_id="dup-1")
    created = await _append(client, "r1", exchange)
    again = await _append(client, "r1", exchange)
    assert (created.status_code, again.status_code) == (201, 200)
    assert again.json() == created.json()
    changed = await _append(client, "r1", chat_exchange(model_call_id="dup-1", text="other"))
    assert changed.status_code == 409
    assert "dup-1" in changed.json()["detail"]
    calls = (await client.get("/v1/rollouts/r1/model-calls")).json()["calls"]
    assert len(calls) == 1 and calls[0]["request"] == exchange["request"]


async def test_bad_rollout_ids_are_400(client: httpx.AsyncClient) -> None:
    for bad in ("a b", "röllout", ".hidden", "x" * 201):
        reply = await _append(client, bad, chat_exchange())
        assert reply.status_code == 400, bad
        assert reply.json()["detail"] == f"Invalid rollout id: {bad!r}"
        read = await client.get(f"/v1/rollouts/{bad}/ng_model_call_capture")
        assert read.status_code == 400
    assert (await client.get("/v1/events")).json()["events"] == []


async def test_bad_bodies_are_422_naming_the_field(client: httpx.AsyncClient) -> None:
    cases: list[tuple[Any, str]] = [
        ([1, 2], "exchange: must be a JSON object"),
        ({**chat_exchange(), "extra_key": 1}, "exchange.extra_key"),
        ({**chat_exchange(), "status_code": "200"}, "exchange.status_code"),
        ({**chat_exchange(), "request": "text"}, "exchange.request"),
        (
            {**chat_exchange(), "model_ref": {"type": "other", "name": "m"}},
            "exchange.model_ref.type",
        ),
        ({**chat_exchange(), "latency_ms": -1}, "exchange.latency_ms"),
    ]
    for body, field in cases:
        reply = await _append(client, "r1", body)
        assert reply.status_code == 422, body
        assert field in reply.json()["detail"]
    not_json = await client.post(
        "/v1/rollouts/r1/model-calls",
        content=b"{nope",
        headers={"content-type": "application/json"},
    )
    assert not_json.status_code == 422 and "body" in not_json.json()["detail"]
    nan = await client.post(
        "/v1/rollouts/r1/model-calls",
        content=b'{"latency_ms": NaN}',
        headers={"content-type": "application/json"},
    )
    assert nan.status_code == 422 and "latency_ms" in nan.json()["detail"]
    # Inside the opaque payloads too, single and batched: the body parser refuses them, so
    # the payload's encoding (orjson, which would write null) never meets them.
    for content, path in [
        (b'{"request": {"temperature": NaN}}', "exchange.request.temperature"),
        (b'{"response": {"logprobs": [0.5, -Infinity]}}', "exchange.response.logprobs.1"),
    ]:
        reply = await client.post(
            "/v1/rollouts/r1/model-calls",
            content=content,
            headers={"content-type": "application/json"},
        )
        assert reply.status_code == 422 and path in reply.json()["detail"], reply.text
    batch = await client.post(
        "/v1/model-calls/batch",
        content=b'{"items": [{"rollout_id": "r1", "exchange": {"request": {"x": [Infinity]}}}]}',
        headers={"content-type": "application/json"},
    )
    assert batch.status_code == 200, batch.text
    [item] = batch.json()["results"]
    assert item["status"] == 422 and "items.0.exchange.request.x.0" in item["detail"], item
    assert (await client.get("/v1/events")).json()["events"] == []


async def test_reads_follow_gym_records_and_attachment(client: httpx.AsyncClient) -> None:
    exchanges = [chat_exchange(), responses_exchange(), messages_exchange(), failed_exchange()]
    for exchange in exchanges:
        assert (await _append(client, "r1", exchange)).status_code == 201
    expected_records = [build_model_call_record(e, i) for i, e in enumerate(exchanges)]
    full = (await client.get("/v1/rollouts/r1/model-calls")).json()
    assert full == {
        "rollout_id": "r1",
        "calls": [r.model_dump(mode="json") for r in expected_records],
        "gaps": [],
    }
    for payloads in (False, True):
        attachment = (
            await client.get(
                "/v1/rollouts/r1/ng_model_call_capture",
                params={"payloads": str(payloads).lower()},
            )
        ).json()
        assert attachment == build_capture_attachment(
            "r1", expected_records, [], include_payloads=payloads
        )
    default = (await client.get("/v1/rollouts/r1/ng_model_call_capture")).json()
    assert "request" not in default["calls"][0] and "gaps" not in default
    assert default["metrics"]["num_calls"] == 4
    # Anthropic cache fold (7 + 100 + 20) and null-aware sums.
    assert default["metrics"]["tokens_in"] == 12 + 30 + 127
    assert default["calls"][2]["cache_creation_tokens"] == 20


async def test_unknown_rollout_reads_as_no_records(client: httpx.AsyncClient) -> None:
    attachment = (await client.get("/v1/rollouts/never/ng_model_call_capture")).json()
    assert attachment == {
        "rollout_id": "never",
        "metrics": {
            "tokens_in": None,
            "tokens_out": None,
            "tokens_reasoning": None,
            "tokens_total": None,
            "cached_tokens": None,
            "latency_total_ms": None,
            "num_calls": 0,
        },
        "calls": [],
        "gaps": [{"code": "model_call_capture_no_records"}],
    }


async def test_incomplete_marker_and_clear(client: httpx.AsyncClient) -> None:
    marked = await client.post("/v1/rollouts/r1/model-calls/incomplete")
    assert marked.status_code == 201 and marked.json()["incomplete"] is True
    assert (await client.post("/v1/rollouts/r1/model-calls/incomplete")).status_code == 200
    gaps = (await client.get("/v1/rollouts/r1/ng_model_call_capture")).json()["gaps"]
    # A marker without any line: only incomplete (Gym adds no_records only without a marker).
    assert [g["code"] for g in gaps] == ["model_call_capture_incomplete"]
    assert gaps == capture_gaps(
        has_evidence=True, record_count=0, damaged_count=0, incomplete=True, pending=False
    )
    await _append(client, "r1", chat_exchange(model_call_id="before-clear"))
    await _append(client, "r1-a1", chat_exchange(model_call_id="attempt"))
    cleared = await client.delete("/v1/rollouts/r1/model-calls")
    assert cleared.status_code == 200 and cleared.json()["cleared"] is True
    after = (await client.get("/v1/rollouts/r1/ng_model_call_capture")).json()
    assert after["calls"] == [] and after["gaps"] == [{"code": "model_call_capture_no_records"}]
    # The same id may be used again after a clear, and positions restart at 0.
    again = await _append(client, "r1", chat_exchange(model_call_id="before-clear", text="new"))
    assert again.status_code == 201 and again.json()["call_index"] == 0
    # The attempt id is a different id: untouched by the clear.
    attempt = (await client.get("/v1/rollouts/r1-a1/model-calls")).json()["calls"]
    assert [c["model_call_id"] for c in attempt] == ["attempt"]
    nothing = await client.delete("/v1/rollouts/fresh/model-calls")
    assert nothing.json() == {"rollout_id": "fresh", "cleared": False, "seq": None}


async def test_pending_calls_report_a_gap_until_captured_or_withdrawn(
    client: httpx.AsyncClient,
) -> None:
    await _append(client, "r1", chat_exchange(model_call_id="done"))
    announced = await client.post(
        "/v1/rollouts/r1/model-calls/pending", json={"model_call_id": "in-flight"}
    )
    assert announced.status_code == 201 and announced.json()["pending"] is True
    await client.post("/v1/rollouts/r1/model-calls/pending", json={"model_call_id": "other"})
    codes = [
        g["code"]
        for g in (await client.get("/v1/rollouts/r1/ng_model_call_capture")).json()["gaps"]
    ]
    assert codes == ["model_call_capture_pending"]
    await _append(client, "r1", chat_exchange(model_call_id="in-flight"))
    withdrawn = await client.delete(
        "/v1/rollouts/r1/model-calls/pending", params={"model_call_id": "other"}
    )
    assert withdrawn.json()["withdrawn"] is True
    assert "gaps" not in (await client.get("/v1/rollouts/r1/ng_model_call_capture")).json()
    late = await client.post("/v1/rollouts/r1/model-calls/pending", json={"model_call_id": "done"})
    assert late.status_code == 200 and late.json()["pending"] is False
    bad = await client.post("/v1/rollouts/r1/model-calls/pending", json={"id": "x"})
    assert bad.status_code == 422
    no_id = await client.delete("/v1/rollouts/r1/model-calls/pending")
    assert no_id.status_code == 422 and "model_call_id" in no_id.text


async def test_batch_gives_one_result_per_item(client: httpx.AsyncClient) -> None:
    await _append(client, "r1", chat_exchange(model_call_id="taken"))
    items = [
        {"rollout_id": "r1", "exchange": chat_exchange(model_call_id="b1")},
        {"rollout_id": "bad id", "exchange": chat_exchange()},
        {"rollout_id": "r2", "exchange": {"status_code": "x"}},
        {"rollout_id": "r1", "exchange": chat_exchange(model_call_id="taken", text="different")},
        {"rollout_id": "r1", "exchange": chat_exchange(model_call_id="taken")},
        {"rollout_id": "r2", "exchange": messages_exchange(model_call_id="b2")},
        {"rollout_id": "r2"},
    ]
    reply = await client.post("/v1/model-calls/batch", json={"items": items})
    assert reply.status_code == 200
    results = reply.json()["results"]
    assert [r["status"] for r in results] == [201, 400, 422, 409, 200, 201, 422]
    assert results[0]["call_index"] == 1 and results[5]["call_index"] == 0
    assert "items.2.exchange.status_code" in results[2]["detail"]
    assert "items.6.exchange" in results[6]["detail"]
    too_many = {"items": [{"rollout_id": "r", "exchange": {}}] * 1001}
    assert (await client.post("/v1/model-calls/batch", json=too_many)).status_code == 422
    assert (await client.post("/v1/model-calls/batch", json={"rows": []})).status_code == 422


async def test_oversized_bodies_are_413_and_tokens_are_enforced(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path / "limited",
        database_url=database_url,
        control_token="control-secret",
        ingest_token="ingest-secret",
        read_token="read-secret",
        max_body_bytes=2048,
        mirror_enabled=False,
    )
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            ingest = {"Authorization": "Bearer ingest-secret"}
            read = {"Authorization": "Bearer read-secret"}
            big = chat_exchange(text="x" * 4096)
            too_big = await http.post("/v1/rollouts/r1/model-calls", json=big, headers=ingest)
            assert too_big.status_code == 413
            assert "2048" in too_big.json()["detail"]
            small = chat_exchange()
            assert (await http.post("/v1/rollouts/r1/model-calls", json=small)).status_code == 401
            wrong = {"Authorization": "Bearer read-secret"}
            denied = await http.post("/v1/rollouts/r1/model-calls", json=small, headers=wrong)
            assert denied.status_code == 401
            ok = await http.post("/v1/rollouts/r1/model-calls", json=small, headers=ingest)
            assert ok.status_code == 201
            assert (await http.delete("/v1/rollouts/r1/model-calls")).status_code == 401
            reads = "/v1/rollouts/r1/ng_model_call_capture"
            assert (await http.get(reads)).status_code == 401
            attachment = await http.get(reads, headers=read)
            assert attachment.status_code == 200
            assert attachment.json()["metrics"]["num_calls"] == 1


async def test_openapi_documents_the_capture_routes(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    paths = schema["paths"]
    assert "requestBody" in paths["/v1/rollouts/{rollout_id}/model-calls"]["post"]
    assert "/v1/model-calls/batch" in paths
    assert "/v1/rollouts/{rollout_id}/ng_model_call_capture" in paths
    assert set(paths["/v1/rollouts/{rollout_id}/model-calls/pending"]) == {"post", "delete"}
