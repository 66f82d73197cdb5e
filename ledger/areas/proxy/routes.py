"""The proxy's routes and its lifetime inside the app.

``/ng-rollout/{rollout_id}/v1/...`` and ``/ng-rollout/{rollout_id}/upstreams/{name}/v1/...``
(captured for the three dialects), ``/upstreams/{name}/v1/...``, and the three unprefixed dialect
routes (forwarded, never captured, as in Gym). They are one plain ASGI front route, served
before the app's middleware and router (ledger/app/http/front.py: no FastAPI body parsing,
dependency solving or route scan on the model-call path); the router's lifespan starts the
upstream client and the recorder once the ledger is open, and drains the captures before it
closes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ledger.app.bootstrap import Ledger
from ledger.app.http.front import FrontRoute
from ledger.areas.proxy.capture_process import CaptureProcess, capture_process_enabled
from ledger.areas.proxy.capture_sink import CaptureSink, InProcessSink
from ledger.areas.proxy.capture_worker import WorkerOptions
from ledger.areas.proxy.forwarder import Forwarder, ProxyLimits
from ledger.areas.proxy.metrics import ProxyMetrics
from ledger.areas.proxy.recorder import CaptureRecorder
from ledger.areas.proxy.upstream_client import UpstreamClient
from ledger.areas.proxy.upstreams import load_upstreams
from ledger.gym.dialects import DIALECT_BY_PATH

# How long shutdown waits for captures of calls already answered.
DRAIN_TIMEOUT_S = 30.0


class _ProxyFront:
    """The proxy's front route (ledger/app/http/front.py): every request under
    ``/ng-rollout/`` or ``/upstreams/``, whatever its characters or method, and a POST to an
    unprefixed dialect path.

    Matched by prefix, not by a Starlette path pattern: those are regexes whose ``.`` stops at
    a newline, so a percent-encoded CRLF in a rollout id would fall through to a plain 404
    instead of the 400 that names the id. The forwarder parses the raw path itself. It is
    served in front of the app's middleware, so the forwarder bounds and times the body read
    itself (``ProxyLimits``).
    """

    def claims(self, scope: Scope) -> bool:
        path: str = scope["path"]
        if path.startswith(_PREFIXES):
            return True
        return scope["method"] == "POST" and path in DIALECT_BY_PATH

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        forwarder: Forwarder = scope["app"].state.proxy
        await forwarder(scope, receive, send)


_PREFIXES = ("/ng-rollout/", "/upstreams/")


def front_routes() -> list[FrontRoute]:
    return [_ProxyFront()]


@asynccontextmanager
async def _lifespan(app: Any) -> AsyncIterator[None]:
    ledger: Ledger = app.state.ledger
    settings = ledger.settings
    upstreams = load_upstreams(settings.upstreams, settings.upstream_key_envs)
    metrics = ProxyMetrics(ledger.metrics.registry)
    recorder = CaptureRecorder(ledger.captures, metrics, _capture_sink(ledger, metrics))
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
            # The server-wide body limit and deadline apply too: the front route is served
            # before the middleware that enforces them elsewhere.
            max_request_bytes=min(settings.proxy_max_request_bytes, settings.max_body_bytes),
            max_response_bytes=settings.proxy_max_response_bytes,
            body_timeout_s=settings.body_timeout_s,
        ),
        ingest_token=None if ingest is None else ingest.get_secret_value(),
    )
    try:
        yield
    finally:
        await recorder.drain(DRAIN_TIMEOUT_S)
        await client.aclose()


def _capture_sink(ledger: Ledger, metrics: ProxyMetrics) -> CaptureSink:
    in_process = InProcessSink(ledger.captures)
    settings = ledger.settings
    if not capture_process_enabled(settings):
        return in_process
    process = CaptureProcess(
        WorkerOptions(
            url=settings.resolved_database_url,
            synchronous=settings.synchronous,
            busy_timeout_ms=settings.busy_timeout_ms,
            max_batch=settings.writer_max_batch,
            max_batch_bytes=settings.writer_max_batch_bytes,
            nice=settings.proxy_capture_nice,
            health_follower=settings.health_follower_home == "capture process",
        ),
        fallback=in_process,
        metrics=metrics,
    )
    process.start()
    return process


def build_router() -> APIRouter:
    """The proxy's lifespan, and its dialect paths for any method but POST (405, as before
    the front route took the POSTs)."""
    router = APIRouter(lifespan=_lifespan)
    endpoint = _ProxyFront()
    for path in DIALECT_BY_PATH:
        router.routes.append(Route(path, endpoint, methods=["POST"], include_in_schema=False))
    return router
