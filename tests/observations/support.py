"""Shared pieces of the observations store/API tests."""

from __future__ import annotations

from typing import Any

import httpx

from tests.gym.test_trajectory_example import EXAMPLE_RECORD

# The example's call as the model server captured it (a Responses exchange, Gym's line shape).
EXAMPLE_EXCHANGE: dict[str, Any] = {
    "model_call_id": "call-1",
    "dialect": "responses",
    "model_ref": None,
    "started_at": 1764400000.0,
    "completed_at": 1764400000.5,
    "latency_ms": 500.0,
    "latency_ttft_ms": None,
    "status_code": 200,
    "error_category": None,
    "request": {"input": "Look up the answer"},
    "response": {
        "output": [
            {"type": "function_call", "call_id": "tool-1", "name": "lookup", "arguments": "{}"}
        ],
        "usage": {"input_tokens": 12, "output_tokens": 8},
    },
}
EXAMPLE_OBSERVATIONS: dict[str, Any] = EXAMPLE_RECORD["ng_agent_observations"]
EXAMPLE_RESULT: dict[str, Any] = {
    "task_id": "task-7",
    "_ng_task_index": 0,
    "_ng_rollout_index": 0,
    "latency_ms": 910,
}


def exchange(model_call_id: str, **fields: Any) -> dict[str, Any]:
    return {**EXAMPLE_EXCHANGE, "model_call_id": model_call_id, **fields}


async def post_ok(client: httpx.AsyncClient, url: str, body: object) -> dict[str, Any]:
    response = await client.post(url, json=body)
    assert response.status_code in (200, 201), response.text
    payload: dict[str, Any] = response.json()
    return payload


async def feed_example(client: httpx.AsyncClient, rollout_id: str = "0-0") -> None:
    await post_ok(client, f"/v1/rollouts/{rollout_id}/model-calls", EXAMPLE_EXCHANGE)
    await post_ok(client, f"/v1/rollouts/{rollout_id}/observations", EXAMPLE_OBSERVATIONS)
    await post_ok(client, f"/v1/rollouts/{rollout_id}/result", EXAMPLE_RESULT)


async def get_record(client: httpx.AsyncClient, rollout_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/rollouts/{rollout_id}/record")
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()
    return record
