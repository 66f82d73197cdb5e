"""The observation routes over HTTP on both backends: inputs, 422s, superseding, reads."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ledger.app.bootstrap import Ledger
from ledger.areas.observations.events import OBSERVATIONS_RECORDED
from tests.gym.test_trajectory_example import EXAMPLE_RECORD
from tests.observations.support import (
    EXAMPLE_OBSERVATIONS,
    EXAMPLE_RESULT,
    exchange,
    feed_example,
    get_record,
    post_ok,
)
from tests.support.observations import assert_shows


def ledger_of(app: FastAPI) -> Ledger:
    ledger: Ledger = app.state.ledger
    return ledger


async def test_joined_example_over_http(client: httpx.AsyncClient) -> None:
    await feed_example(client)

    record = await get_record(client, "0-0")
    assert_shows(record, EXAMPLE_RECORD)
    assert list(record["ng_perf"].items()) == list(EXAMPLE_RECORD["ng_perf"].items())
    assert record["ng_trajectory"]["gaps"] == [
        {"code": "turns_unavailable", "invocation_id": None, "detail": None}
    ]
    assert "request" not in record["ng_model_call_capture"]["calls"][0]
    trajectory = await client.get("/v1/rollouts/0-0/trajectory")
    assert trajectory.status_code == 200
    assert trajectory.json() == record["ng_trajectory"]


async def test_record_identity_fields_come_from_the_result(client: httpx.AsyncClient) -> None:
    await feed_example(client)
    record = await get_record(client, "0-0")
    assert list(record)[:3] == ["task_id", "_ng_task_index", "_ng_rollout_index"]
    assert record["task_id"] == "task-7"


USER_TURN = {"role": "user", "content": "2+2?"}
ASSISTANT_WITHOUT_ID = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "4", "annotations": []}],
}
ASSISTANT_WITHOUT_ANNOTATIONS = {
    "type": "message",
    "role": "assistant",
    "id": "msg_1",
    "content": [{"type": "output_text", "text": "4"}],
}


def invocation_with(*conversation: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "agent_invocation",
        "invocation_id": "inv-1",
        "conversation": list(conversation),
    }


INVALID_BUNDLES: list[tuple[str, dict[str, Any], str]] = [
    (
        "ref-without-key",
        {"records": [{"kind": "agent_invocation", "invocation_id": "r", "model_calls": [{}]}]},
        "records.0.agent_invocation.model_calls.0: "
        "model_call_id or both model_ref and response_id are required",
    ),
    (
        "duplicate-invocation",
        {
            "records": [
                {"kind": "agent_invocation", "invocation_id": "r"},
                {"kind": "agent_invocation", "invocation_id": "r"},
            ]
        },
        "invocation_id must be unique within an observation bundle",
    ),
    (
        "cycle",
        {
            "records": [
                {"kind": "agent_invocation", "invocation_id": "a", "parent_invocation_id": "b"},
                {"kind": "agent_invocation", "invocation_id": "b", "parent_invocation_id": "a"},
            ]
        },
        "parent_invocation_id must not form a cycle",
    ),
    (
        "timing",
        {
            "records": [
                {
                    "kind": "tool_call",
                    "invocation_id": "r",
                    "tool_call_id": "t",
                    "started_at": 2.0,
                    "completed_at": 1.0,
                }
            ]
        },
        "records.0.tool_call: completed_at must not be earlier than started_at",
    ),
    (
        "negative-count",
        {"records": [{"kind": "context_compaction", "invocation_id": "r", "tokens_before": -1}]},
        "records.0.context_compaction.tokens_before: Input should be greater than or equal to 0",
    ),
    (
        "turn-record",
        {"records": [{"kind": "turn", "invocation_id": "r"}]},
        "records.0: Input tag 'turn' found using 'kind' does not match any of the expected tags",
    ),
    (
        "unknown-field",
        {"records": [], "extra_field": 1},
        "extra_field: Extra inputs are not permitted",
    ),
    ("missing-source", {"records": [], "source": None}, "source: Input should be a valid string"),
    (
        "assistant-output-without-id",
        {"records": [invocation_with(USER_TURN, ASSISTANT_WITHOUT_ID)]},
        "records.0.agent_invocation.conversation.1: not a Responses input item (read as "
        "output_message): id: Field required",
    ),
    (
        "output-text-without-annotations",
        {"records": [invocation_with(USER_TURN, ASSISTANT_WITHOUT_ANNOTATIONS)]},
        "records.0.agent_invocation.conversation.1: not a Responses input item (read as "
        "output_message): content.0.OutputText.annotations: Field required",
    ),
    (
        "unknown-item-type",
        {"records": [invocation_with({"type": "tool_result", "output": "x"})]},
        "records.0.agent_invocation.conversation.0: not a Responses input item (read as "
        "tool_result): (item): Input tag 'tool_result' found using item_tag() does not match",
    ),
]


@pytest.mark.parametrize(
    ("body", "message"),
    [pytest.param(body, message, id=name) for name, body, message in INVALID_BUNDLES],
)
async def test_invalid_bundle_is_422_with_the_contract_message(
    client: httpx.AsyncClient, app: FastAPI, body: dict[str, Any], message: str
) -> None:
    response = await client.post("/v1/rollouts/0-0/observations", json={"source": "a", **body})
    assert response.status_code == 422
    assert message in response.json()["detail"]
    assert await ledger_of(app).store.head_seq() == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"{not json", "body: not valid JSON"), (b"[1]", "must be a JSON object, not list")],
)
async def test_malformed_bodies_are_422(
    client: httpx.AsyncClient, content: bytes, message: str
) -> None:
    for route in ("observations", "result"):
        response = await client.post(
            f"/v1/rollouts/0-0/{route}",
            content=content,
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 422
        assert message in response.json()["detail"]


async def test_non_finite_numbers_in_free_form_items_are_422(client: httpx.AsyncClient) -> None:
    body = (
        b'{"source": "a", "records": [{"kind": "agent_invocation", "invocation_id": "r",'
        b' "conversation": [{"type": "message", "content": NaN}]}]}'
    )
    response = await client.post(
        "/v1/rollouts/0-0/observations", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert "not JSON" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"_ng_attempt_index": -1},
            "_ng_attempt_index: Input should be greater than or equal to 0",
        ),
        ({"_ng_rollout_id": "a b"}, "_ng_rollout_id must be a string of letters"),
        ({"latency_ms": "fast"}, "latency_ms: latency_ms must be a number of milliseconds"),
        ({"resolved": "yes"}, "resolved: Input should be a valid boolean"),
        ({"ng_trajectory": []}, "ng_trajectory: Input should be a valid dictionary"),
        ({"task_index": 3}, "task_index: Extra inputs are not permitted"),
    ],
)
async def test_invalid_result_is_422(
    client: httpx.AsyncClient, body: dict[str, Any], message: str
) -> None:
    response = await client.post("/v1/rollouts/0-0/result", json=body)
    assert response.status_code == 422
    assert message in response.json()["detail"]


async def test_invalid_rollout_id_is_400(client: httpx.AsyncClient) -> None:
    for path in ("observations", "result", "record", "trajectory"):
        method = client.get if path in ("record", "trajectory") else client.post
        kwargs: dict[str, Any] = {} if method == client.get else {"json": {"source": "a"}}
        response = await method(f"/v1/rollouts/.hidden/{path}", **kwargs)
        assert response.status_code == 400
        assert response.json()["detail"] == "Invalid rollout id: '.hidden'"


async def test_unknown_rollout_record_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/rollouts/never-seen/record")
    assert response.status_code == 404
    assert "has no record" in response.json()["detail"]
    response = await client.get("/v1/rollouts/never-seen/trajectory")
    assert response.status_code == 404


async def test_later_bundle_supersedes_and_both_stay_in_the_log(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    first = {"source": "first", "records": [], "gaps": [{"code": "agent_transcript_unavailable"}]}
    await post_ok(client, "/v1/rollouts/r1/observations", first)
    await post_ok(
        client, "/v1/rollouts/r1/observations", {**EXAMPLE_OBSERVATIONS, "source": "second"}
    )

    record = await get_record(client, "r1")
    assert record["ng_agent_observations"]["source"] == "second"
    codes = [gap["code"] for gap in record["ng_trajectory"]["gaps"]]
    assert "agent_transcript_unavailable" not in codes
    events = await ledger_of(app).store.events(rollout_id="r1")
    assert [event.kind for event in events] == [OBSERVATIONS_RECORDED, OBSERVATIONS_RECORDED]
    assert events[0].payload is not None and events[0].payload["bundle"]["source"] == "first"


async def test_later_result_supersedes(client: httpx.AsyncClient) -> None:
    await post_ok(client, "/v1/rollouts/0-0/result", {**EXAMPLE_RESULT, "resolved": False})
    await post_ok(
        client, "/v1/rollouts/0-0/result", {**EXAMPLE_RESULT, "resolved": True, "latency_ms": 5}
    )
    await post_ok(client, "/v1/rollouts/0-0/observations", EXAMPLE_OBSERVATIONS)
    record = await get_record(client, "0-0")
    assert record["resolved"] is True
    assert record["ng_perf"]["total_latency_ms"] == 5


async def test_idempotency_key_repeats_answer_with_the_original(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    headers = {"Idempotency-Key": "bundle-1"}
    url = "/v1/rollouts/0-0/observations"
    first = await client.post(url, json=EXAMPLE_OBSERVATIONS, headers=headers)
    again = await client.post(url, json=EXAMPLE_OBSERVATIONS, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json() == {**again.json(), "created": True}
    other = await client.post(url, json={**EXAMPLE_OBSERVATIONS, "source": "x"}, headers=headers)
    assert other.status_code == 409
    assert "already used" in other.json()["detail"]
    assert await ledger_of(app).store.head_seq() == 1


async def test_capture_after_the_bundle_recomputes_the_join(client: httpx.AsyncClient) -> None:
    bundle = {
        "source": "a",
        "records": [
            {
                "kind": "agent_invocation",
                "invocation_id": "root",
                "model_calls": [{"model_call_id": "c1"}, {"model_call_id": "c2"}],
                "conversation": [{"type": "message", "role": "user", "content": "q"}],
            }
        ],
    }
    await post_ok(client, "/v1/rollouts/r2/model-calls", exchange("c1"))
    await post_ok(client, "/v1/rollouts/r2/observations", bundle)
    before = await get_record(client, "r2")
    assert before["ng_agent_observations"]["gaps"] == [
        {"code": "model_call_reference_unmatched", "invocation_id": "root", "detail": "c2"}
    ]
    assert before["ng_perf"]["token_observability_coverage"] == 1.0

    await post_ok(client, "/v1/rollouts/r2/model-calls", exchange("c2", request={"input": "2"}))
    after = await get_record(client, "r2")
    assert after["ng_agent_observations"]["gaps"] == []
    assert after["ng_model_call_capture"]["metrics"]["num_calls"] == 2
    assert [c["request"] for c in after["ng_trajectory"]["model_calls"]] == [
        {"input": "Look up the answer"},
        {"input": "2"},
    ]
    assert after["ng_perf"]["num_turns"] == 2
    assert after["ng_perf"]["prompt_tokens"] == 24


async def test_capture_only_rollout_has_a_trajectory_with_unowned_calls(
    client: httpx.AsyncClient,
) -> None:
    await post_ok(client, "/v1/rollouts/4-2-a1/model-calls", exchange("c1"))
    record = await get_record(client, "4-2-a1")
    trajectory = record["ng_trajectory"]
    assert (trajectory["task_id"], trajectory["rollout_id"]) == ("4", "4-2-a1")
    assert [gap["code"] for gap in trajectory["gaps"]] == [
        "turns_unavailable",
        "conversation_unavailable",
    ]
    assert "ng_perf" not in record  # no invocation


async def test_result_only_rollout_reports_missing_capture(client: httpx.AsyncClient) -> None:
    await post_ok(client, "/v1/rollouts/0-0/result", EXAMPLE_RESULT)
    record = await get_record(client, "0-0")
    assert record["ng_model_call_capture"] == {
        "rollout_id": "0-0",
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
    assert [gap["code"] for gap in record["ng_trajectory"]["gaps"]] == [
        "model_call_capture_no_records",
        "model_calls_unavailable",
        "turns_unavailable",
        "conversation_unavailable",
    ]


async def test_projection_failure_keeps_capture_payloads(client: httpx.AsyncClient) -> None:
    # The producer saw tool-1 start late; the agent saw it complete early. Each is valid alone;
    # merged, completed_at < started_at, so the projection raises and Gym's fallback applies.
    producer = {
        "task_id": "task-7",
        "rollout_id": "0-0",
        "tool_calls": [
            {
                "kind": "tool_call",
                "invocation_id": "root",
                "tool_call_id": "tool-1",
                "started_at": 9.0,
            }
        ],
    }
    bundle = {
        **EXAMPLE_OBSERVATIONS,
        "records": [
            EXAMPLE_OBSERVATIONS["records"][0],
            {
                "kind": "tool_call",
                "invocation_id": "root",
                "tool_call_id": "tool-1",
                "completed_at": 1.0,
            },
        ],
    }
    await post_ok(client, "/v1/rollouts/0-0/model-calls", exchange("call-1"))
    await post_ok(client, "/v1/rollouts/0-0/observations", bundle)
    await post_ok(client, "/v1/rollouts/0-0/result", {**EXAMPLE_RESULT, "ng_trajectory": producer})
    record = await get_record(client, "0-0")
    assert "ng_trajectory" not in record
    assert "ng_perf" not in record
    capture = record["ng_model_call_capture"]
    assert capture["gaps"] == [
        {"code": "trajectory_projection_failed", "detail": "ValidationError"}
    ]
    assert capture["calls"][0]["request"] == {"input": "Look up the answer"}
    response = await client.get("/v1/rollouts/0-0/trajectory")
    assert response.status_code == 404
    assert "trajectory_projection_failed" in response.json()["detail"]


async def test_record_export_view(client: httpx.AsyncClient) -> None:
    await feed_example(client)
    response = await client.get("/v1/rollouts/0-0/record", params={"view": "export"})
    assert response.status_code == 200
    view = response.json()
    assert "ng_trajectory" not in view
    assert view["ng_perf"] == EXAMPLE_RECORD["ng_perf"]
    assert set(view["ng_model_call_capture"]["calls"][0]).isdisjoint({"request", "response"})
