"""``ledger export --otlp`` in-process against a collector on loopback (the selection, the
collector's headers, the summary), and each misuse of the OTLP options as a usage error (exit
2) that says why, of ``export`` and of ``serve``."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from ledger.areas.otel.ids import span_id
from tests.cli.support import invoke
from tests.otel.collector import running_collector
from tests.support.exchanges import chat_exchange
from tests.support.views import views_caught_up


async def test_export_sends_the_selection_with_the_collectors_headers(
    client: httpx.AsyncClient,
    app: FastAPI,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for rollout_id, run in (("a-0", "run-a"), ("a-1", "run-a"), ("b-0", "run-b")):
        for n in range(2):
            body = chat_exchange(model_call_id=f"{rollout_id}-{n}")
            answer = await client.post(
                f"/v1/rollouts/{rollout_id}/model-calls?run={run}", json=body
            )
            assert answer.status_code == 201, answer.text
    # The command reads the views as they are (a run-level read): the test waits for them.
    await views_caught_up(app)
    monkeypatch.setenv("LEDGER_OTLP_HEADERS", "x-key=k%3D1")
    with running_collector() as collector:
        result = await asyncio.to_thread(
            invoke, database_url, "export", "--otlp", collector.url, "--run", "run-a"
        )
        assert result.exit_code == 0, result.output
        assert f"exported 2 rollouts to {collector.url}/v1/traces" in result.output
        assert "spans sent: 6, refused: 0, requests retried: 0" in result.output
        roots = {span_id(r, 0, "rollout", "") for r in ("a-0", "a-1", "b-0")}
        assert collector.taken() & roots == roots - {span_id("b-0", 0, "rollout", "")}
        assert len(collector.taken()) == 6
        assert collector.headers[0]["x-key"] == "k=1"

        collector.answer = 400
        refused = await asyncio.to_thread(
            invoke, database_url, "export", "--otlp", collector.url, "--id", "b-*"
        )
        assert refused.exit_code == 1
        assert "spans sent: 0, refused: 3" in refused.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["export", "--otlp", "ftp://x"], "http(s) URL"),
        (["export", "--run", "r"], "--run: only with --otlp URL"),
        (["export", "--content"], "--content: only with --otlp URL"),
        (["export", "--otlp", "http://127.0.0.1:9", "--view", "export"], "--view: not with"),
        (["export", "--otlp", "http://127.0.0.1:9", "--id", "a/b"], "ids: a glob"),
        (["export", "--otlp", "http://127.0.0.1:9", "--run", "a b"], "run"),
        (["serve", "--otlp-endpoint", "http://127.0.0.1:9", "--workers", "2"], "--workers 1"),
    ],
)
def test_otlp_options_refuse_misuse(args: list[str], says: str) -> None:
    result = invoke("sqlite+aiosqlite:///unused.db", *args)
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_malformed_collector_headers_are_refused_without_their_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEDGER_OTLP_HEADERS", "authorization=Bearer%20ok,s3cret-token")
    for args in (
        ["export", "--otlp", "http://127.0.0.1:9"],
        ["serve", "--otlp-endpoint", "http://127.0.0.1:9"],
    ):
        result = invoke("sqlite+aiosqlite:///unused.db", *args)
        assert result.exit_code == 2, result.output
        assert "LEDGER_OTLP_HEADERS: pair 2 is not key=value" in result.output
        assert "s3cret" not in result.output
