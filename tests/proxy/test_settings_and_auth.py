"""Upstream settings, the ``--upstream`` option, and the ingest token on proxy routes."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import anthropic
import httpx
import openai
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from ledger.app.cli.main import main
from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.areas.proxy.upstream_client import Origin
from ledger.areas.proxy.upstreams import load_upstreams
from ledger.gym.dialects import MODEL_CALL_ID_HEADER
from ledger.log.errors import UnsafeConfiguration
from tests.support.databases import sqlite_url
from tests.support.fake_upstream import FakeUpstreamProcess
from tests.support.server import ServerProcess


@pytest.mark.parametrize(
    ("upstreams", "message"),
    [
        ({"a b": "http://x"}, "upstream name"),
        ({"a": "ftp://x"}, "http(s)"),
        ({"a": "http://x/?k=1"}, "no query"),
        ({"a": "http://user:pw@x"}, "credentials"),
        ({"a": "not a url"}, "http(s)"),
    ],
)
def test_bad_upstreams_are_refused_naming_the_problem(
    upstreams: dict[str, str], message: str
) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Settings(upstreams=upstreams)


@pytest.mark.parametrize("sdk", [openai, anthropic], ids=["openai", "anthropic"])
def test_default_read_timeout_answers_a_hung_upstream_before_the_sdk_gives_up(
    sdk: ModuleType,
) -> None:
    # The SDK gives up after a silence of its own read timeout; the proxy's must end first, so
    # the client gets the proxy's 504 (which the SDK retries) and the capture says timeout.
    sdk_read_timeout = sdk.DEFAULT_TIMEOUT.read
    assert isinstance(sdk_read_timeout, float | int)
    assert Settings.model_fields["proxy_read_timeout_s"].default < sdk_read_timeout


def test_key_env_must_name_a_configured_upstream() -> None:
    with pytest.raises(ValidationError, match="no such upstream"):
        Settings(upstreams={"a": "http://x"}, upstream_key_envs={"b": "KEY"})


def test_key_is_read_from_the_named_variable_and_kept_secret() -> None:
    loaded = load_upstreams({"a": "http://x/v1"}, {"a": "KEY"}, {"KEY": "sk-1"})
    upstream = loaded["a"]
    assert upstream.api_key is not None
    assert upstream.api_key.get_secret_value() == "sk-1"
    assert "sk-1" not in repr(upstream)
    with pytest.raises(UnsafeConfiguration, match="KEY"):
        load_upstreams({"a": "http://x"}, {"a": "KEY"}, {})


@pytest.mark.parametrize(
    ("url", "origin", "host", "forwarded"),
    [
        ("http://h:1", Origin("http", "h", 1), b"h:1", b"/v1/chat/completions?x=%20"),
        ("http://h:1/v1/", Origin("http", "h", 1), b"h:1", b"/v1/chat/completions?x=%20"),
        (
            "https://gw/openai/v1",
            Origin("https", "gw", 443),
            b"gw",
            b"/openai/v1/chat/completions?x=%20",
        ),
        ("http://[::1]:8/", Origin("http", "::1", 8), b"[::1]:8", b"/v1/chat/completions?x=%20"),
        ("http://bücher.example", Origin("http", "xn--bcher-kva.example", 80), None, None),
    ],
)
def test_forwarded_request_keeps_the_client_path_and_query(
    url: str, origin: Origin, host: bytes | None, forwarded: bytes | None
) -> None:
    upstream = load_upstreams({"u": url}, {}, {})["u"]
    assert upstream.origin == origin
    assert upstream.host_header == (host or origin.host.encode())
    if forwarded is not None:
        assert upstream.target(b"/v1/chat/completions", b"x=%20") == forwarded


def test_serve_refuses_a_malformed_upstream_option(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["serve", "--data-dir", str(tmp_path), "--upstream", "no-equals-sign"]
    )
    assert result.exit_code == 2
    assert "expected NAME=VALUE" in result.output


@pytest.fixture
async def guarded_client(
    tmp_path: Path, database_url: str, upstream: FakeUpstreamProcess
) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        ingest_token="ingest-secret",
        upstreams={"fake": upstream.url},
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http


async def test_with_an_ingest_token_the_proxy_requires_it_and_never_forwards_it(
    guarded_client: httpx.AsyncClient, upstream: FakeUpstreamProcess
) -> None:
    marker = uuid.uuid4().hex
    body = {"model": "plain", "max_tokens": 8, "messages": [{"role": "user", "content": marker}]}
    refused = await guarded_client.post("/ng-rollout/r1/v1/messages", json=body)
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "authentication_error"
    wrong = await guarded_client.post(
        "/ng-rollout/r1/v1/chat/completions", json=body, headers={"authorization": "Bearer no"}
    )
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == 401
    accepted = await guarded_client.post(
        "/ng-rollout/r1/v1/messages", json=body, headers={"x-api-key": "ingest-secret"}
    )
    assert accepted.status_code == 200
    bearer = await guarded_client.post(
        "/ng-rollout/r1/v1/chat/completions",
        json=body,
        headers={"authorization": "Bearer ingest-secret"},
    )
    assert bearer.status_code == 200
    received = [r for r in upstream.requests() if marker in r["body"]]
    assert len(received) == 2
    assert "ingest-secret" not in str([r["headers"] for r in received])


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_serve_upstream_option_proxies_and_captures(
    tmp_path: Path, upstream: FakeUpstreamProcess, workers: int
) -> None:
    """``ledger serve --upstream NAME=URL`` end to end; with ``--workers 2`` the option reaches
    the worker processes through the environment (as JSON)."""
    server = ServerProcess(
        data_dir=tmp_path / "data",
        database_url=sqlite_url(tmp_path),
        argv=(
            "ledger",
            "serve",
            "--upgrade",
            "--workers",
            str(workers),
            "--upstream",
            f"cli={upstream.url}",
        ),
    )
    (tmp_path / "data").mkdir()
    with server:
        if workers > 1:
            server.wait_for_children(workers)
        rollout_id = f"cli-{workers}"
        response = httpx.post(
            f"{server.base_url}/ng-rollout/{rollout_id}/v1/chat/completions",
            json={"model": "plain", "messages": []},
        )
        assert response.status_code == 200
        model_call_id = response.headers[MODEL_CALL_ID_HEADER]
        deadline = time.monotonic() + 30
        while True:
            calls = httpx.get(f"{server.base_url}/v1/rollouts/{rollout_id}/model-calls").json()
            if calls["calls"] or time.monotonic() > deadline:
                break
            time.sleep(0.02)  # poll
        [record] = calls["calls"]
        assert record["model_call_id"] == model_call_id
        assert record["model_ref"]["name"] == "cli"
