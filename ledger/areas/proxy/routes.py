"""The proxy's routes and its lifetime inside the app.

``/ng-rollout/{rollout_id}/v1/...`` and ``/ng-rollout/{rollout_id}/upstreams/{name}/v1/...``
(captured for the three dialects), ``/upstreams/{name}/v1/...``, and the three unprefixed dialect
routes (forwarded, never captured, as in Gym). The routes are plain ASGI (no FastAPI body
parsing or dependency solving on the model-call path); the router's lifespan starts the upstream
client and the recorder once the ledger is open, and drains the captures before it closes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter
from starlette.routing import Match, Mount, Route
from starlette.types import Receive, Scope, Send

from ledger.app.bootstrap import Ledger
from ledger.areas.proxy.forwarder import Forwarder, ProxyLimits
from ledger.areas.proxy.metrics import ProxyMetrics
from ledger.areas.proxy.recorder import CaptureRecorder
from ledger.areas.proxy.upstream_client import UpstreamClient
from ledger.areas.proxy.upstreams import load_upstreams
from ledger.gym.dialects import DIALECT_BY_PATH

# How long shutdown waits for captures of calls already answered.
DRAIN_TIMEOUT_S = 30.0


class _PrefixRoute(Mount):
    """Every request whose path starts with ``<prefix>/``, whatever its characters.

    Starlette's path patterns are regexes whose ``.`` stops at a newline: a percent-encoded
    CRLF in a rollout id would fall through to a plain 404 instead of being forwarded
    uncorrelated as Gym does. The forwarder parses the raw path itself. (A Mount, so FastAPI
    includes it from a router as it is.)
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and scope["path"].startswith(self.path + "/"):
            return Match.FULL, {}
        return Match.NONE, {}


class _ProxyEndpoint:
    """The ASGI app behind every proxy route: the running app's forwarder."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        forwarder: Forwarder = scope["app"].state.proxy
        await forwarder(scope, receive, send)


@asynccontextmanager
async def _lifespan(app: Any) -> AsyncIterator[None]:
    ledger: Ledger = app.state.ledger
    settings = ledger.settings
    upstreams = load_upstreams(settings.upstreams, settings.upstream_key_envs)
    metrics = ProxyMetrics(ledger.metrics.registry)
    recorder = CaptureRecorder(ledger.captures, metrics)
    recorder.start()
    client = UpstreamClient(
        connect_timeout_s=settings.proxy_connect_timeout_s,
        read_timeout_s=settings.proxy_read_timeout_s,
        max_connections=settings.proxy_max_connections,
    )
    ingest = settings.ingest_token
    app.state.proxy = Forwarder(
        client=client,
        upstreams=upstreams,
        recorder=recorder,
        metrics=metrics,
        limits=ProxyLimits(
            max_request_bytes=settings.proxy_max_request_bytes,
            max_response_bytes=settings.proxy_max_response_bytes,
        ),
        ingest_token=None if ingest is None else ingest.get_secret_value(),
    )
    try:
        yield
    finally:
        await recorder.drain(DRAIN_TIMEOUT_S)
        await client.aclose()


def build_router() -> APIRouter:
    router = APIRouter(lifespan=_lifespan)
    endpoint = _ProxyEndpoint()
    router.routes.append(_PrefixRoute("/ng-rollout", app=endpoint))
    router.routes.append(_PrefixRoute("/upstreams", app=endpoint))
    for path in DIALECT_BY_PATH:
        router.routes.append(Route(path, endpoint, methods=["POST"], include_in_schema=False))
    return router
