"""The token-count check over the result route: the agent's ``response.usage`` (Gym's result
row field, the sum over the model responses that finished) makes it observable, so a clean
rollout is healthy; without it the check stays unobserved; a different sum is a finding."""

from __future__ import annotations

from typing import Any

import httpx

POLICY = {"type": "responses_api_models", "name": "policy"}


def _call(call_id: str, prompt: int, completion: int) -> dict[str, Any]:
    return {
        "model_call_id": call_id,
        "dialect": "responses",
        "model_ref": POLICY,
        "started_at": 1.0,
        "completed_at": 1.5,
        "status_code": 200,
        "request": {"input": "q"},
        "response": {
            "id": f"resp-{call_id}",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "an answer"}],
                }
            ],
            "usage": {"input_tokens": prompt, "output_tokens": completion},
        },
    }


async def _clean_rollout(
    client: httpx.AsyncClient, rollout_id: str, task: int, usage: dict[str, int] | None
) -> dict[str, Any]:
    calls = [_call(f"{rollout_id}-c1", 30, 7), _call(f"{rollout_id}-c2", 50, 11)]
    for call in calls:
        answer = await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=call)
        assert answer.status_code == 201, answer.text
    refs = [{"model_call_id": call["model_call_id"]} for call in calls]
    bundle = {
        "source": "test",
        "records": [
            {
                "kind": "agent_invocation",
                "invocation_id": "root",
                "model_calls": refs,
                "conversation": [{"type": "message", "role": "user", "content": "q"}],
            }
        ],
        "gaps": [],
    }
    answer = await client.post(f"/v1/rollouts/{rollout_id}/observations", json=bundle)
    assert answer.status_code in (200, 201), answer.text
    turns = [
        {
            "invocation_id": "root",
            "task_id": f"task-{task}",
            "rollout_id": rollout_id,
            "turn_no": number,
            "timestamp": float(number),
            "answer": "an answer",
            "step_count": number,
            "model_calls": [ref],
        }
        for number, ref in enumerate(refs, start=1)
    ]
    result: dict[str, Any] = {
        "task_id": f"task-{task}",
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
        "resolved": True,
        "ng_trajectory": {"task_id": f"task-{task}", "rollout_id": rollout_id, "turns": turns},
    }
    if usage is not None:
        result["response"] = {"id": "agent-response", "output": [], "usage": usage}
    answer = await client.post(f"/v1/rollouts/{rollout_id}/result", json=result)
    assert answer.status_code in (200, 201), answer.text
    health = await client.get(f"/v1/rollouts/{rollout_id}/health")
    assert health.status_code == 200, health.text
    return dict(health.json())


async def test_usage_in_the_result_makes_a_clean_rollout_healthy(
    client: httpx.AsyncClient,
) -> None:
    matching = await _clean_rollout(client, "1-0", 1, {"input_tokens": 80, "output_tokens": 18})
    assert matching["verdict"] == "healthy"
    assert matching["findings"] == []
    assert matching["unobserved"] == []
    # Chat Completions names are read too (Responses names first, as Gym does).
    chat = await _clean_rollout(client, "2-0", 2, {"prompt_tokens": 80, "completion_tokens": 18})
    assert chat["verdict"] == "healthy"
    record = (await client.get("/v1/rollouts/2-0/record")).json()
    assert record["response"]["usage"] == {"prompt_tokens": 80, "completion_tokens": 18}


async def test_without_usage_the_check_is_unobserved(client: httpx.AsyncClient) -> None:
    health = await _clean_rollout(client, "3-0", 3, None)
    assert health["verdict"] == "unobserved"
    assert health["unobserved"] == ["rollout_token_count_mismatch"]


async def test_a_different_sum_is_a_finding(client: httpx.AsyncClient) -> None:
    health = await _clean_rollout(client, "4-0", 4, {"input_tokens": 80, "output_tokens": 19})
    assert health["verdict"] == "unhealthy"
    assert [f["check"] for f in health["findings"]] == ["rollout_token_count_mismatch"]
    assert health["findings"][0]["detail"] == {
        "transcript_prompt": 80,
        "transcript_completion": 19,
        "capture_prompt": 80,
        "capture_completion": 18,
    }


async def test_a_response_that_is_not_an_object_is_a_422(client: httpx.AsyncClient) -> None:
    answer = await client.post("/v1/rollouts/5-0/result", json={"response": "text"})
    assert answer.status_code == 422
    assert "response" in answer.text
    assert len(answer.text) < 2000
