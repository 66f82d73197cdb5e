"""Whatever is accepted never breaks a later write or read of its rollout (issue 14: a capture
nesting deep was accepted and every later result or observations write failed with 500).

Bodies exactly at the nesting limit (the default and the highest the setting allows), and
the largest numbers accepted, are written, then more writes of the same rollout, then every
view is read."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.app.config import MAX_JSON_DEPTH_CEILING, Settings
from ledger.gym.capture_lines import MAX_MEASURE
from tests.api.support import running_app
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row
from tests.observations.support import EXAMPLE_OBSERVATIONS, EXAMPLE_RESULT, exchange


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def depth_of(value: Any) -> int:
    stack = [(value, 1)]
    deepest = 0
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def capture_at(limit: int, model_call_id: str) -> dict[str, Any]:
    # A deep copy: the example exchange is shared by other tests.
    body = copy.deepcopy(exchange(model_call_id))
    body["response"]["deep"] = nested(limit - 2)
    assert depth_of(body) == limit
    return body


def observations_at(limit: int) -> dict[str, Any]:
    bundle = copy.deepcopy(EXAMPLE_OBSERVATIONS)
    # records -> [0] -> conversation -> [1] -> a key Gym's item model does not name (kept as
    # given, like Gym's models keep it): the bundle root is level 1.
    bundle["records"][0]["conversation"][1]["detail"] = nested(limit - 5)
    assert depth_of(bundle) == limit
    return bundle


def result_at(limit: int) -> dict[str, Any]:
    result = {**EXAMPLE_RESULT, "ng_trajectory": nested(limit - 1)}
    assert depth_of(result) == limit
    return result


@pytest.mark.parametrize("limit", [128, MAX_JSON_DEPTH_CEILING])
async def test_bodies_at_the_depth_limit_never_poison_their_rollout(
    tmp_path: Path, database_url: str, limit: int
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        control_token="control-secret",
        max_json_depth=limit,
    )
    rollout = "0-0"
    async with running_app(settings) as (_, client):
        single = await client.post(
            f"/v1/rollouts/{rollout}/model-calls", json=capture_at(limit, "call-1")
        )
        assert single.status_code == 201, single.text
        # A batch exchange sits three levels below the body's root (items -> [i] -> exchange).
        batch = await client.post(
            "/v1/model-calls/batch",
            json={"items": [{"rollout_id": rollout, "exchange": capture_at(limit - 3, "call-2")}]},
        )
        assert [r["status"] for r in batch.json()["results"]] == [201], batch.text
        result = await client.post(f"/v1/rollouts/{rollout}/result", json=result_at(limit))
        assert result.status_code == 201, result.text
        observed = await client.post(
            f"/v1/rollouts/{rollout}/observations", json=observations_at(limit)
        )
        assert observed.status_code == 201, observed.text
        row = await client.post(
            f"/v1/rollouts/{rollout}/ledger/rows", json=committed_row(rollout, "call-1")
        )
        assert row.status_code == 200, row.text
        # Writes after the deep ones still succeed, and supersede them.
        again = await client.post(f"/v1/rollouts/{rollout}/result", json=EXAMPLE_RESULT)
        assert again.status_code == 201, again.text
        later = await client.post(
            f"/v1/rollouts/{rollout}/model-calls", json=capture_at(limit, "call-3")
        )
        assert later.status_code == 201, later.text
        await assert_every_view_reads(client, rollout)


async def assert_every_view_reads(client: httpx.AsyncClient, rollout: str) -> None:
    views = [
        f"/v1/rollouts/{rollout}",
        f"/v1/rollouts/{rollout}/model-calls",
        f"/v1/rollouts/{rollout}/model-calls?payloads=false",
        f"/v1/rollouts/{rollout}/ng_model_call_capture",
        f"/v1/rollouts/{rollout}/ng_model_call_capture?payloads=true",
        f"/v1/rollouts/{rollout}/record",
        f"/v1/rollouts/{rollout}/record?view=export",
        f"/v1/rollouts/{rollout}/trajectory",
        f"/v1/rollouts/{rollout}/ledger/rows?model_call_id=call-1",
        "/v1/events?limit=1000",
        "/v1/export",
        "/v1/export?view=export",
    ]
    for url in views:
        reply = await client.get(url)
        assert reply.status_code == 200, (url, reply.text[:300])
    manifest = await client.get(
        f"/training-token-capture/control/rollouts/{rollout}/manifest", headers=CONTROL_HEADERS
    )
    assert manifest.status_code == 200, manifest.text
    calls = (await client.get(f"/v1/rollouts/{rollout}/model-calls")).json()["calls"]
    assert [call["model_call_id"] for call in calls] == ["call-1", "call-2", "call-3"]
    record = json.loads((await client.get(f"/v1/rollouts/{rollout}/record")).text)
    assert len(record["ng_model_call_capture"]["calls"]) == 3


async def test_the_largest_accepted_numbers_never_poison_their_rollout(
    client: httpx.AsyncClient,
) -> None:
    """Sums of accepted numbers stay finite and storable (issue 14: two captures with huge
    latencies made every later capture of the rollout a 500)."""
    rollout = "0-0"
    for n in range(3):
        body = copy.deepcopy(exchange(f"call-{n}", latency_ms=MAX_MEASURE))
        body["response"]["usage"] = {"input_tokens": 2**63 - 1, "output_tokens": 2**63 - 1}
        reply = await client.post(f"/v1/rollouts/{rollout}/model-calls", json=body)
        assert reply.status_code == 201, reply.text
    too_long = await client.post(
        f"/v1/rollouts/{rollout}/model-calls", json=exchange("call-x", latency_ms=1e308)
    )
    assert too_long.status_code == 422
    assert "latency_ms" in too_long.json()["detail"]
    result = {**EXAMPLE_RESULT, "latency_ms": MAX_MEASURE}
    assert (await client.post(f"/v1/rollouts/{rollout}/result", json=result)).status_code == 201
    bundle = copy.deepcopy(EXAMPLE_OBSERVATIONS)
    bundle["records"][1]["duration_ms"] = MAX_MEASURE
    observed = await client.post(f"/v1/rollouts/{rollout}/observations", json=bundle)
    assert observed.status_code == 201, observed.text
    for url in (
        f"/v1/rollouts/{rollout}/ng_model_call_capture",
        f"/v1/rollouts/{rollout}/record",
        f"/v1/rollouts/{rollout}/trajectory",
        "/v1/export",
    ):
        assert (await client.get(url)).status_code == 200, url
    metrics = (await client.get(f"/v1/rollouts/{rollout}/ng_model_call_capture")).json()
    assert metrics["metrics"]["latency_total_ms"] == 3 * MAX_MEASURE
