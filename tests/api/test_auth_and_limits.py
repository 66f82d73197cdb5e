"""Bearer tokens on /v1 reads and writes and on /metrics and the API document, the body size
limit, and bad bodies (never a 500).

There are no /v1 write routes in the foundation yet, so a probe route using the real
``IngestAuth`` dependency and a real pydantic body is mounted on the real app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from pydantic import BaseModel, ConfigDict

from ledger.app.config import Settings
from ledger.app.http.auth import IngestAuth
from tests.api.support import running_app


class ProbeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    count: int


def add_probe_route(app: FastAPI) -> None:
    router = APIRouter(prefix="/v1")

    @router.post("/probe")
    async def probe(body: ProbeBody, _auth: IngestAuth) -> dict[str, Any]:
        return {"received": body.model_dump()}

    app.include_router(router)


def make_settings(tmp_path: Path, database_url: str, **overrides: Any) -> Settings:
    return Settings(data_dir=tmp_path / "data", database_url=database_url, **overrides)


@pytest.fixture
async def guarded(database_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        tmp_path, database_url, read_token="read-secret", ingest_token="ingest-secret"
    )
    async with running_app(settings, add_probe_route) as (_app, http):
        yield http


@pytest.fixture
async def open_probe(database_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(tmp_path, database_url, max_body_bytes=2048)
    async with running_app(settings, add_probe_route) as (_app, http):
        yield http


READ_PATHS = ["/v1/events", "/v1/rollouts/r1"]
BAD_HEADERS = [
    {},
    {"Authorization": "Bearer wrong"},
    {"Authorization": "read-secret"},
    {"Authorization": "Bearer read-secret "},
    {"Authorization": "Basic read-secret"},
    {"Authorization": "Bearer ingest-secret"},
]


@pytest.mark.parametrize("path", READ_PATHS)
@pytest.mark.parametrize("headers", BAD_HEADERS)
async def test_reads_need_the_read_token_when_set(
    guarded: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> None:
    response = await guarded.get(path, headers=headers)
    assert response.status_code == 401
    assert response.json() == {"detail": "missing or invalid read bearer token"}


@pytest.mark.parametrize("path", READ_PATHS)
async def test_reads_pass_with_the_read_token(guarded: httpx.AsyncClient, path: str) -> None:
    response = await guarded.get(path, headers={"Authorization": "Bearer read-secret"})
    # r1 was never seen: passing auth means reaching the handler's 404.
    assert response.status_code == (404 if "rollouts" in path else 200)


async def test_health_routes_need_no_token(guarded: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz"):
        assert (await guarded.get(path)).status_code == 200


# The Prometheus text, the OpenAPI document and its two renderings tell what the ledger runs.
DOCUMENT_PATHS = ["/openapi.json", "/docs", "/redoc"]
OPERATIONS_PATHS = ["/metrics", *DOCUMENT_PATHS]


@pytest.mark.parametrize("path", OPERATIONS_PATHS)
@pytest.mark.parametrize("headers", BAD_HEADERS)
async def test_metrics_and_the_api_document_need_the_read_token_when_set(
    guarded: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> None:
    response = await guarded.get(path, headers=headers)
    assert response.status_code == 401
    assert "bearer token" in response.json()["detail"]


@pytest.mark.parametrize("path", OPERATIONS_PATHS)
async def test_metrics_and_the_api_document_pass_with_the_read_token(
    guarded: httpx.AsyncClient, path: str
) -> None:
    response = await guarded.get(path, headers={"Authorization": "Bearer read-secret"})
    assert response.status_code == 200
    assert ("ledger_" if path == "/metrics" else "Rollout ledger") in response.text


@pytest.mark.parametrize("path", ["/healthz", "/readyz", *OPERATIONS_PATHS])
async def test_operations_routes_are_open_without_a_read_token(
    open_probe: httpx.AsyncClient, path: str
) -> None:
    assert (await open_probe.get(path)).status_code == 200


@pytest.fixture
async def scraped(database_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        tmp_path, database_url, read_token="read-secret", metrics_token="metrics-secret"
    )
    async with running_app(settings, add_probe_route) as (_app, http):
        yield http


async def test_the_metrics_token_reads_metrics_and_nothing_else(
    scraped: httpx.AsyncClient,
) -> None:
    scraper = {"Authorization": "Bearer metrics-secret"}
    assert (await scraped.get("/metrics", headers=scraper)).status_code == 200
    reader = {"Authorization": "Bearer read-secret"}
    assert (await scraped.get("/metrics", headers=reader)).status_code == 200
    assert (await scraped.get("/metrics")).status_code == 401
    for path in [*DOCUMENT_PATHS, *READ_PATHS]:
        assert (await scraped.get(path, headers=scraper)).status_code == 401, path


async def test_a_metrics_token_alone_guards_metrics_only(database_url: str, tmp_path: Path) -> None:
    settings = make_settings(tmp_path, database_url, metrics_token="metrics-secret")
    async with running_app(settings, add_probe_route) as (_app, http):
        assert (await http.get("/metrics")).status_code == 401
        scraper = {"Authorization": "Bearer metrics-secret"}
        assert (await http.get("/metrics", headers=scraper)).status_code == 200
        assert (await http.get("/openapi.json")).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer read-secret"}],
)
async def test_writes_need_the_ingest_token_when_set(
    guarded: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await guarded.post("/v1/probe", json={"text": "t", "count": 1}, headers=headers)
    assert response.status_code == 401
    assert response.json() == {"detail": "missing or invalid ingest bearer token"}


async def test_writes_pass_with_the_ingest_token(guarded: httpx.AsyncClient) -> None:
    response = await guarded.post(
        "/v1/probe",
        json={"text": "t", "count": 1},
        headers={"Authorization": "Bearer ingest-secret"},
    )
    assert response.status_code == 200
    assert response.json() == {"received": {"text": "t", "count": 1}}


async def test_no_token_is_required_when_none_is_set(open_probe: httpx.AsyncClient) -> None:
    assert (await open_probe.get("/v1/events")).status_code == 200
    assert (await open_probe.get("/v1/rollouts/r1")).status_code == 404
    written = await open_probe.post("/v1/probe", json={"text": "t", "count": 2})
    assert written.status_code == 200


async def test_empty_tokens_mean_unset(database_url: str, tmp_path: Path) -> None:
    settings = make_settings(tmp_path, database_url, read_token="", ingest_token="")
    async with running_app(settings, add_probe_route) as (_app, http):
        assert (await http.get("/v1/events")).status_code == 200
        assert (await http.post("/v1/probe", json={"text": "t", "count": 3})).status_code == 200


async def test_a_body_over_the_limit_is_413(open_probe: httpx.AsyncClient) -> None:
    response = await open_probe.post("/v1/probe", json={"text": "x" * 4000, "count": 1})
    assert response.status_code == 413
    assert response.json() == {"detail": "request body exceeds the limit of 2048 bytes"}
    # The connection closes: the rest of the body is not read and discarded on the event loop.
    assert response.headers["connection"] == "close"


async def test_a_streamed_body_over_the_limit_is_413(open_probe: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"text": "'
        for _ in range(10):
            yield b"x" * 500
        yield b'", "count": 1}'

    # No Content-Length: the limit must be enforced while the body arrives.
    response = await open_probe.post(
        "/v1/probe", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json() == {"detail": "request body exceeds the limit of 2048 bytes"}
    # The connection closes: the rest of the body is not read and discarded on the event loop.
    assert response.headers["connection"] == "close"


async def test_a_body_at_the_limit_is_accepted(open_probe: httpx.AsyncClient) -> None:
    prefix, suffix = b'{"text":"', b'","count":1}'
    body = prefix + b"y" * (2048 - len(prefix) - len(suffix)) + suffix
    assert len(body) == 2048
    response = await open_probe.post(
        "/v1/probe", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (b'{"text": "t", "count": 1', None),
        (b"not json at all", None),
        (b'{"text": "t", "count": "many"}', "count"),
        (b'{"text": 5, "count": 1}', "text"),
        (b'{"count": 1}', "text"),
        (b'{"text": "t", "count": 1, "extra": true}', "extra"),
        (b"[1, 2]", None),
        (b"", None),
        (b"\xff\xfe", None),
    ],
)
async def test_malformed_bodies_are_422(
    open_probe: httpx.AsyncClient, content: bytes, field: str | None
) -> None:
    response = await open_probe.post(
        "/v1/probe", content=content, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    errors = response.json()["detail"]
    assert errors and all(error["loc"][0] == "body" for error in errors)
    if field is not None:
        assert ["body", field] in [list(error["loc"]) for error in errors]
