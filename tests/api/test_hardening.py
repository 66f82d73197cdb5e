"""Issue 14's smaller defects over HTTP: identifiers outside visible ASCII, log injection,
repeated Authorization headers, the Host allow-list, the OpenAPI document."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ledger.app.config import Settings
from ledger.log.log_text import loggable
from tests.api.support import running_app
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row, failure_row

RETIRE = "/training-token-capture/control/rollouts/retire"
CONTROLS = ["\r\n", "\n", "\r", "\x00", "\x1b[31m", " ", "\u2028", "é"]


async def event_kinds(client: httpx.AsyncClient) -> list[str]:
    reply = await client.get("/v1/events", params={"limit": 1000})
    return [event["kind"] for event in reply.json()["events"]]


@pytest.mark.parametrize("bad", CONTROLS)
@pytest.mark.parametrize(
    "row",
    [
        lambda bad: committed_row("r1", f"c1{bad}x"),
        lambda bad: committed_row("r1", "c1", staging_key=f"r1/c1{bad}WARNING forged"),
        lambda bad: committed_row("r1", "c1", parent_call_id=f"p{bad}"),
        lambda bad: committed_row("r1", "c1", staging_chain=[f"k{bad}"]),
        lambda bad: failure_row(f"c1{bad}"),
    ],
    ids=["model_call_id", "staging_key", "parent_call_id", "staging_chain", "failure_id"],
)
async def test_row_identifiers_outside_visible_ascii_are_422(
    client: httpx.AsyncClient, row: Any, bad: str
) -> None:
    reply = await client.post("/v1/rollouts/r1/ledger/rows", json=row(bad))
    assert reply.status_code == 422, reply.text
    assert await event_kinds(client) == []


@pytest.mark.parametrize("bad", CONTROLS)
async def test_pending_withdraw_query_outside_visible_ascii_is_422(
    client: httpx.AsyncClient, bad: str
) -> None:
    url = "/v1/rollouts/r1/model-calls/pending"
    reply = await client.delete(url, params={"model_call_id": f"c{bad}1"})
    assert reply.status_code == 422
    assert reply.json()["detail"][0]["loc"] == ["query", "model_call_id"]
    lookup = await client.get("/v1/rollouts/r1/ledger/rows", params={"model_call_id": f"c{bad}"})
    assert lookup.status_code == 422


async def test_a_crlf_staging_key_cannot_reach_the_discard_warning(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    assert (
        await client.post(RETIRE, json={"rollout_ids": ["r1"]}, headers=CONTROL_HEADERS)
    ).status_code == 200
    forged = "r1/c1\r\n2026-01-01 00:00:00 WARNING ledger: forged line"
    with caplog.at_level(logging.WARNING):
        refused = await client.post(
            "/v1/rollouts/r1/ledger/rows", json=committed_row("r1", "c1", staging_key=forged)
        )
        late = await client.post("/v1/rollouts/r1/ledger/rows", json=committed_row("r1", "c2"))
    assert refused.status_code == 422
    assert late.json()["outcome"] == "discarded"
    messages = [record.getMessage() for record in caplog.records]
    assert any("r1/c2" in message for message in messages)
    assert not any("forged" in message for message in messages)
    assert all("\n" not in message and "\r" not in message for message in messages)


def test_log_text_escapes_what_could_forge_a_line() -> None:
    assert loggable("r1/c1") == "r1/c1"
    assert loggable("a\r\nb") == "a\\r\\nb"
    assert loggable("x\u2028y\x1b") == "x\\u2028y\\u001b"
    assert len(loggable("k" * 10_000)) < 300


@pytest.mark.parametrize(
    "values",
    [
        ["Bearer control-secret", "Bearer wrong"],
        ["Bearer wrong", "Bearer control-secret"],
        ["Bearer control-secret", "Bearer control-secret"],
    ],
)
async def test_repeated_authorization_headers_never_authenticate(
    client: httpx.AsyncClient, values: list[str]
) -> None:
    headers = [("authorization", value) for value in values]
    manifest = await client.get(
        "/training-token-capture/control/rollouts/r1/manifest", headers=headers
    )
    assert manifest.status_code == 401
    retire = await client.post(RETIRE, json={"rollout_ids": ["r1"]}, headers=headers)
    assert retire.status_code == 401
    single = await client.get(
        "/training-token-capture/control/rollouts/r1/manifest", headers=headers[:1]
    )
    assert single.status_code == (200 if values[0].endswith("control-secret") else 401)


async def test_repeated_authorization_headers_fail_on_ingest_and_read(
    tmp_path: Path, database_url: str
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        ingest_token="in-secret",
        read_token="read-secret",
    )
    async with running_app(settings) as (_, client):
        twice = [("authorization", "Bearer in-secret"), ("authorization", "Bearer x")]
        reply = await client.post("/v1/rollouts/r1/model-calls/incomplete", headers=twice)
        assert reply.status_code == 401
        twice = [("authorization", "Bearer read-secret"), ("authorization", "Bearer x")]
        assert (await client.get("/v1/events", headers=twice)).status_code == 401
        once = [("authorization", "Bearer read-secret")]
        assert (await client.get("/v1/events", headers=once)).status_code == 200


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8420", "127.0.0.1", "127.0.0.1:9", "[::1]", "[::1]:8420"]
)
async def test_loopback_hosts_are_allowed(client: httpx.AsyncClient, host: str) -> None:
    assert (await client.get("/healthz", headers={"host": host})).status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8420", "127.0.0.1.evil.example", "localhost.", "[::2]"]
)
async def test_other_hosts_are_400(client: httpx.AsyncClient, host: str) -> None:
    reply = await client.post("/v1/rollouts/r1/model-calls/incomplete", headers={"host": host})
    assert reply.status_code == 400
    assert "Host" in reply.json()["detail"]
    assert len(reply.content) < 200
    assert await event_kinds(client) == []


async def test_a_setting_adds_hosts(tmp_path: Path, database_url: str) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", database_url=database_url, allowed_hosts=["ledger.internal"]
    )
    async with running_app(settings) as (_, client):
        for host in ("ledger.internal", "Ledger.Internal:8420", "localhost"):
            assert (await client.get("/healthz", headers={"host": host})).status_code == 200
        assert (await client.get("/healthz", headers={"host": "other"})).status_code == 400


def test_allowed_hosts_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_ALLOWED_HOSTS", '["a.example", "b.example"]')
    assert Settings().allowed_hosts == ["a.example", "b.example"]


def resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        assert isinstance(node, dict) and part in node, f"unresolvable {ref}"
        node = node[part]
    return node


def refs_in(node: Any) -> list[str]:
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            if isinstance(current.get("$ref"), str):
                found.append(current["$ref"])
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return found


def test_every_openapi_reference_resolves(app: FastAPI) -> None:
    document = app.openapi()
    refs = refs_in(document)
    assert len(refs) > 50
    for ref in refs:
        resolve(document, ref)
    assert "$defs" not in str(document)


EXPECTED_ERRORS = {
    ("post", "/v1/rollouts/{rollout_id}/model-calls"): {400, 401, 409, 413, 415, 422},
    ("post", "/v1/model-calls/batch"): {400, 401, 413, 415, 422},
    ("post", "/v1/rollouts/{rollout_id}/ledger/rows"): {400, 401, 409, 413, 415, 422},
    ("post", "/v1/rollouts/{rollout_id}/observations"): {400, 401, 409, 413, 415, 422},
    ("post", "/v1/rollouts/{rollout_id}/result"): {400, 401, 409, 413, 415, 422},
    ("post", "/training-token-capture/control/rollouts/retire"): {400, 401, 413, 415, 422},
    ("get", "/training-token-capture/control/rollouts/{rollout_id}/manifest"): {400, 401, 410},
    ("get", "/v1/rollouts/{rollout_id}/admission"): {400, 401, 410},
    ("get", "/v1/rollouts/{rollout_id}"): {400, 401, 404},
    ("get", "/v1/rollouts/{rollout_id}/trajectory"): {400, 401, 404},
    ("get", "/v1/rollouts/{rollout_id}/record"): {400, 401, 404},
}


def test_openapi_documents_the_error_statuses(app: FastAPI) -> None:
    paths = app.openapi()["paths"]
    for (method, path), statuses in EXPECTED_ERRORS.items():
        documented = {int(code) for code in paths[path][method]["responses"]}
        assert statuses <= documented, (method, path, statuses - documented)
    body = paths["/v1/rollouts/{rollout_id}/ledger/rows"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["oneOf"]
