"""What the proxy tests share: the running servers, reads of what was captured, and the
expected capture of an exchange computed by the ledger's own derivation."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ledger.gym.dialects import DIALECT_BY_PATH
from ledger.gym.model_calls import build_model_call_record
from ledger.gym.observed_calls import ObservedCall, exchange_of
from tests.support.databases import sqlite_url
from tests.support.fake_upstream import FakeUpstreamProcess, plan_for
from tests.support.server import ServerProcess

UPSTREAM_KEY = "sk-upstream-secret-0123456789"
CLIENT_KEY = "client-own-key"
READ_TIMEOUT_S = 1.0
MAX_REQUEST_BYTES = 256 * 1024
MAX_RESPONSE_BYTES = 32 * 1024


@dataclass
class Proxy:
    server: ServerProcess
    upstream: FakeUpstreamProcess
    mirror_dir: Path

    @property
    def url(self) -> str:
        return self.server.base_url

    def rollout_url(self, rollout_id: str) -> str:
        return f"{self.url}/ng-rollout/{rollout_id}"


def sqlite_proxy_server(
    directory: Path, upstream: FakeUpstreamProcess, **env: str
) -> ServerProcess:
    """A ``ledger serve`` of its own on SQLite in ``directory``, proxying to ``upstream`` as
    ``fake`` (not started)."""
    (directory / "data").mkdir(exist_ok=True)
    return ServerProcess(
        data_dir=directory / "data",
        database_url=sqlite_url(directory),
        env={"LEDGER_UPSTREAMS": json.dumps({"fake": upstream.url}), **env},
        argv=("ledger", "serve", "--upgrade"),
    )


def wait_for_calls(
    proxy: Proxy, rollout_id: str, count: int, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """The rollout's records (with payloads) once ``count`` are captured."""
    deadline = time.monotonic() + timeout
    while True:
        body = httpx.get(f"{proxy.url}/v1/rollouts/{rollout_id}/model-calls").json()
        calls: list[dict[str, Any]] = body["calls"]
        if len(calls) >= count or time.monotonic() > deadline:
            assert len(calls) == count, f"{len(calls)} of {count} captures after {timeout}s"
            return calls
        time.sleep(0.02)  # poll


def attachment(proxy: Proxy, rollout_id: str) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(
        f"{proxy.url}/v1/rollouts/{rollout_id}/ng_model_call_capture"
    ).json()
    return body


def metric(proxy: Proxy, name: str) -> float:
    """The sum of every sample of ``name`` in /metrics (0 when absent)."""
    total = 0.0
    for line in httpx.get(f"{proxy.url}/metrics").text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            series = line.split(" ")[0]
            if series == name or series.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
    return total


def all_events(proxy: Proxy) -> list[dict[str, Any]]:
    """Every event in the log, page by page."""
    events: list[dict[str, Any]] = []
    after = 0
    while True:
        page = httpx.get(f"{proxy.url}/v1/events", params={"after": after, "limit": 1000}).json()
        events.extend(page["events"])
        if not page["events"]:
            return events
        after = page["next_after"]


def captured_ids(proxy: Proxy) -> list[str]:
    """The model_call_id of every ``model_call.captured`` event, in log order."""
    return [
        event["payload"]["model_call_id"]
        for event in all_events(proxy)
        if event["kind"] == "model_call.captured"
    ]


def upstream_request_for(proxy: Proxy, path: str, marker: str) -> dict[str, Any]:
    """The request the fake upstream received whose body contains ``marker``."""
    found = [r for r in proxy.upstream.requests() if r["path"] == path and marker in r["body"]]
    assert len(found) == 1, f"{len(found)} upstream requests for {marker!r}"
    return found[0]


def expected_record(
    stored: dict[str, Any],
    *,
    path: str,
    request_body: str,
    upstream: str = "fake",
    response_body: bytes | None = None,
    status_code: int | None = None,
    streaming: bool | None = None,
    failure_category: str | None = None,
    client_session_id: str | None = None,
) -> dict[str, Any]:
    """The record the ledger's own derivation gives for the exchange the fake upstream had
    (its answer is ``plan_for`` of the request), with the proxy's measured timings."""
    plan = plan_for(path, json.loads(request_body))
    observed = ObservedCall(
        model_call_id=stored["model_call_id"],
        dialect=DIALECT_BY_PATH[path],
        model_server=upstream,
        started_at=stored["started_at"],
        completed_at=stored["completed_at"],
        latency_ms=stored["latency_total_ms"],
        latency_ttft_ms=stored["latency_ttft_ms"],
        status_code=plan.status if status_code is None else status_code,
        request_body=request_body.encode(),
        response_body=plan.sent() if response_body is None else response_body,
        streaming=plan.content_type.startswith("text/event-stream")
        if streaming is None
        else streaming,
        failure_category=failure_category,
        client_session_id=client_session_id,
    )
    record = build_model_call_record(exchange_of(observed), stored["call_index"])
    return record.model_dump(mode="json")


def assert_sane_timings(record: dict[str, Any]) -> None:
    assert record["completed_at"] >= record["started_at"] > 1.7e9
    assert record["latency_total_ms"] >= 0
    ttft = record["latency_ttft_ms"]
    assert ttft is None or 0 <= ttft <= record["latency_total_ms"]
