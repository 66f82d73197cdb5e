"""The one request-body parser (issue 14): JSON content types only, duplicate keys, nesting,
lone surrogates and integers beyond 64 bits all answered 4xx naming the field, never a 500,
never stored; in a batch, a bad item fails only itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.app.config import Settings
from tests.api.support import running_app
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row
from tests.support.exchanges import chat_exchange

JSON = {"content-type": "application/json"}

BODY_ROUTES = [
    ("/v1/rollouts/r1/model-calls", chat_exchange(model_call_id="c1")),
    ("/v1/model-calls/batch", {"items": [{"rollout_id": "r1", "exchange": chat_exchange()}]}),
    ("/v1/rollouts/r1/model-calls/pending", {"model_call_id": "c9"}),
    ("/v1/rollouts/r1/ledger/rows", committed_row("r1", "c1")),
    ("/v1/rollouts/r1/observations", {"source": "agent", "records": []}),
    ("/v1/rollouts/r1/result", {"task_id": "t"}),
    ("/training-token-capture/control/rollouts/retire", {"rollout_ids": ["r1"]}),
]


async def event_kinds(client: httpx.AsyncClient) -> list[str]:
    reply = await client.get("/v1/events", params={"limit": 1000})
    return [event["kind"] for event in reply.json()["events"]]


def nested(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def exchange_nesting(body_depth: int, **fields: Any) -> dict[str, Any]:
    """A chat exchange whose whole body is ``body_depth`` levels deep (the response nests)."""
    return {**chat_exchange(**fields), "response": nested(body_depth - 1)}


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
@pytest.mark.parametrize(("url", "body"), BODY_ROUTES)
async def test_bodies_that_are_not_json_typed_are_415(
    client: httpx.AsyncClient, url: str, body: Any, content_type: str | None
) -> None:
    headers = {**CONTROL_HEADERS} | ({"content-type": content_type} if content_type else {})
    reply = await client.post(url, content=json.dumps(body).encode(), headers=headers)
    assert reply.status_code == 415, reply.text
    assert "application/json" in reply.json()["detail"]
    assert await event_kinds(client) == []


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "application/vnd.gym+json", "Application/JSON"],
)
async def test_json_media_types_are_accepted(client: httpx.AsyncClient, content_type: str) -> None:
    reply = await client.post(
        "/v1/rollouts/r1/model-calls",
        content=json.dumps(chat_exchange()).encode(),
        headers={"content-type": content_type},
    )
    assert reply.status_code == 201, reply.text


async def test_duplicate_keys_are_refused_naming_the_key(client: httpx.AsyncClient) -> None:
    # The colon inside the value must not hide the dropped key from the cheap check.
    body = b'{"dialect": "chat", "request": {"model": "m", "note": "a:b", "model": "n"}}'
    reply = await client.post("/v1/rollouts/r1/model-calls", content=body, headers=JSON)
    assert reply.status_code == 422
    assert reply.json()["detail"] == 'exchange.request: duplicate key "model"'
    row = json.dumps(committed_row("r1", "c1"))[:-1] + ', "mode": "text"}'
    reply = await client.post("/v1/rollouts/r1/ledger/rows", content=row, headers=JSON)
    assert reply.status_code == 422
    assert reply.json()["detail"][0]["loc"] == ["body"]
    assert "duplicate key" in reply.json()["detail"][0]["msg"]
    assert await event_kinds(client) == []


async def test_colons_and_escaped_colons_are_not_taken_for_duplicates(
    client: httpx.AsyncClient,
) -> None:
    text = json.dumps(chat_exchange(model_call_id="c1", text="time: 10:30"))
    escaped = text.replace('"time: 10:30"', '"time\\u003a 10\\u003A30"')
    reply = await client.post("/v1/rollouts/r1/model-calls", content=escaped, headers=JSON)
    assert reply.status_code == 201, reply.text
    calls = (await client.get("/v1/rollouts/r1/model-calls")).json()["calls"]
    assert calls[0]["request"]["messages"][0]["content"] == "time: 10:30"


async def test_bodies_denser_than_any_payload_are_422_before_parsing(
    client: httpx.AsyncClient,
) -> None:
    body = b'{"dialect": "chat", "request": [' + b",".join([b"{}"] * 20_000) + b"]}"
    reply = await client.post("/v1/rollouts/r1/model-calls", content=body, headers=JSON)
    assert reply.status_code == 422
    assert "20002 JSON objects and arrays in 60033 bytes" in reply.json()["detail"]
    # Braces inside strings are text: the same count spelt in a string is accepted.
    text = json.dumps(chat_exchange(text="{}" * 20_000))
    assert (
        await client.post("/v1/rollouts/r1/model-calls", content=text, headers=JSON)
    ).status_code == 201


async def test_a_capture_nesting_255_deep_is_422_naming_the_limit(
    client: httpx.AsyncClient,
) -> None:
    reply = await client.post("/v1/rollouts/r1/model-calls", json=exchange_nesting(255))
    assert reply.status_code == 422
    assert "deeper than the limit of 128 levels" in reply.json()["detail"]
    assert len(reply.content) < 1024
    assert await event_kinds(client) == []


async def test_nesting_beyond_any_parser_is_422(client: httpx.AsyncClient) -> None:
    # Padded so the body is not refused for its density of containers first.
    body = b'{"pad": "' + b"x" * 60_000 + b'", "response": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    reply = await client.post("/v1/rollouts/r1/model-calls", content=body, headers=JSON)
    assert reply.status_code == 422
    assert "limit of 128" in reply.json()["detail"]


async def test_observations_nesting_954_deep_are_422(client: httpx.AsyncClient) -> None:
    bundle = {
        "source": "agent",
        "records": [
            {
                "kind": "agent_invocation",
                "invocation_id": "i",
                "conversation": [{"type": "message", "content": "PLACEHOLDER"}],
            }
        ],
    }
    # Python's json encoder cannot write this deep: the nesting is spelt out.
    deep = '{"a":' * 949 + "{}" + "}" * 949
    text = json.dumps(bundle).replace('"PLACEHOLDER"', deep)
    reply = await client.post("/v1/rollouts/r1/observations", content=text, headers=JSON)
    assert reply.status_code == 422
    assert "limit of 128" in reply.json()["detail"]
    assert await event_kinds(client) == []


async def test_the_depth_limit_is_a_setting(tmp_path: Path, database_url: str) -> None:
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url, max_json_depth=16)
    async with running_app(settings) as (_, client):
        at_limit = await client.post("/v1/rollouts/r1/model-calls", json=exchange_nesting(16))
        assert at_limit.status_code == 201, at_limit.text
        deeper = await client.post("/v1/rollouts/r1/model-calls", json=exchange_nesting(17))
        assert deeper.status_code == 422
        assert "limit of 16 levels" in deeper.json()["detail"]


async def test_a_bad_batch_item_fails_only_itself(client: httpx.AsyncClient) -> None:
    good = [chat_exchange(model_call_id=f"good-{n}") for n in range(3)]
    wide = chat_exchange(model_call_id="wide")
    wide["response"]["usage"]["prompt_tokens"] = 2**64
    items = [
        {"rollout_id": "r1", "exchange": good[0]},
        {"rollout_id": "r1", "exchange": exchange_nesting(255, model_call_id="deep")},
        {"rollout_id": "r1", "exchange": good[1]},
        {"rollout_id": "r1", "exchange": {"dialect": "chat", "request": {"x": "PLACEHOLDER"}}},
        {"rollout_id": "r1", "exchange": wide},
        {"rollout_id": "r1", "exchange": good[2]},
    ]
    text = json.dumps({"items": items}).replace('"PLACEHOLDER"', '"\\udc00"')
    # A duplicate key inside the sixth item's exchange.
    text = text.replace('"model_call_id": "good-2"', '"model_call_id": "good-2", "dialect": "chat"')
    reply = await client.post("/v1/model-calls/batch", content=text, headers=JSON)
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert [result["status"] for result in results] == [201, 422, 201, 422, 201, 422]
    assert "limit of 128" in results[1]["detail"]
    assert results[3]["detail"] == (
        "body.items.3.exchange.request.x: not valid Unicode (a lone surrogate)"
    )
    assert "duplicate key" in results[5]["detail"]
    calls = (await client.get("/v1/rollouts/r1/model-calls")).json()["calls"]
    assert [call["model_call_id"] for call in calls] == ["good-0", "good-1", "wide"]
    # Beyond 64 bits a usage count is invalid, hence absent; the payload keeps it as sent.
    assert calls[2]["tokens_in"] is None
    assert calls[2]["response"]["usage"]["prompt_tokens"] == 2**64


async def test_a_nul_character_is_422_on_every_backend_and_fails_only_its_item(
    client: httpx.AsyncClient,
) -> None:
    """PostgreSQL text cannot hold a NUL: once it answered 503 there (found by the fuzz);
    both backends now refuse the same bodies."""
    nul = chat_exchange(model_call_id="nul")
    nul["response"]["model"] = "m\x00"
    items = [
        {"rollout_id": "r1", "exchange": chat_exchange(model_call_id="good")},
        {"rollout_id": "r1", "exchange": nul},
    ]
    reply = await client.post("/v1/model-calls/batch", json={"items": items})
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert [result["status"] for result in results] == [201, 422]
    assert "NUL character" in results[1]["detail"]
    assert "body.items.1.exchange.response.model" in results[1]["detail"]
    single = await client.post("/v1/rollouts/r2/model-calls", json=nul)
    assert single.status_code == 422 and "NUL character" in single.json()["detail"]
    calls = (await client.get("/v1/rollouts/r1/model-calls")).json()["calls"]
    assert [call["model_call_id"] for call in calls] == ["good"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cum_len", 2**63),
        ("fingerprint_version", 2**64),
        ("context_len", 2**70),
        ("prev_len", -(2**63) - 1),
    ],
)
async def test_integers_beyond_64_bits_in_a_row_are_422_naming_the_field(
    client: httpx.AsyncClient, field: str, value: int
) -> None:
    reply = await client.post(
        "/v1/rollouts/r1/ledger/rows", json={**committed_row("r1", "c1"), field: value}
    )
    assert reply.status_code == 422, reply.text
    detail = reply.json()["detail"]
    assert detail[0]["loc"] == ["body", field]
    assert "64-bit" in detail[0]["msg"]
    assert await event_kinds(client) == []


async def test_the_largest_64_bit_integer_is_stored(client: httpx.AsyncClient) -> None:
    row = committed_row("r1", "c1", fingerprint_version=2**63 - 1)
    reply = await client.post("/v1/rollouts/r1/ledger/rows", json=row)
    assert reply.status_code == 200, reply.text
    found = await client.get("/v1/rollouts/r1/ledger/rows", params={"model_call_id": "c1"})
    assert found.json()["rows"][0]["row"]["fingerprint_version"] == 2**63 - 1


async def test_a_wide_usage_count_in_a_capture_is_absent(client: httpx.AsyncClient) -> None:
    exchange = chat_exchange(model_call_id="c1")
    exchange["response"]["usage"]["prompt_tokens"] = 2**63
    reply = await client.post("/v1/rollouts/r1/model-calls", json=exchange)
    assert reply.status_code == 201, reply.text
    attachment = (await client.get("/v1/rollouts/r1/ng_model_call_capture")).json()
    assert attachment["calls"][0]["tokens_in"] is None
    assert (
        attachment["calls"][0]["tokens_out"] == exchange["response"]["usage"]["completion_tokens"]
    )


async def test_a_lone_surrogate_in_a_row_mode_is_422_naming_the_field(
    client: httpx.AsyncClient,
) -> None:
    text = json.dumps(committed_row("r1", "c1", mode="PLACEHOLDER"))
    text = text.replace('"PLACEHOLDER"', '"\\ud800"')
    reply = await client.post("/v1/rollouts/r1/ledger/rows", content=text, headers=JSON)
    assert reply.status_code == 422
    assert reply.json()["detail"][0]["loc"] == ["body", "mode"]
    assert await event_kinds(client) == []
