"""``create_app(settings)``: the FastAPI application, built explicitly (nothing at import time)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI

import ledger
from ledger.app.areas import areas
from ledger.app.bootstrap import open_ledger
from ledger.app.config import Settings
from ledger.app.http.errors import install_error_handlers
from ledger.app.http.front import FrontDoor
from ledger.app.http.hosts import HostAllowList
from ledger.app.http.large_bodies import LargeBodyBudget
from ledger.app.http.limits import BodySizeLimit
from ledger.app.http.openapi import install_openapi
from ledger.app.http.projected_seq import ProjectedSeqHeader
from ledger.app.http.timeouts import BodyReadTimeout
from ledger.log.collection import settle_server_process
from ledger.log.projector import Projector


def create_app(settings: Settings, projectors: Sequence[Projector] | None = None) -> FastAPI:
    """The service. ``projectors`` (default: the write side's projections) is for ingest
    diagnostics only: routes that read a left-out projection serve stale or missing data."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        running = await open_ledger(settings, projectors)
        app.state.ledger = running
        try:
            yield
        finally:
            await running.close()

    app = FastAPI(
        title="Rollout ledger",
        version=ledger.__version__,
        description="Append-only, event-sourced ledger for RL rollout evidence (NeMo Gym).",
        lifespan=lifespan,
        # install_openapi serves the document and its pages behind the read token.
        openapi_url=None,
    )
    install_error_handlers(app)
    install_openapi(app)
    # Innermost: it only adds a header to the answers of run-level reads.
    app.add_middleware(ProjectedSeqHeader)
    # Inside the size limit, so an oversized body is refused before it waits its turn.
    app.add_middleware(
        LargeBodyBudget,
        max_body_bytes=settings.max_body_bytes,
        budget_bytes=settings.large_bodies_in_flight_bytes,
    )
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(BodyReadTimeout, seconds=settings.body_timeout_s)
    front_routes = [route for area in areas() for route in area.front_routes()]
    if front_routes:
        app.add_middleware(FrontDoor, routes=front_routes)
    # Outermost: a request for another host name is refused before anything reads its body.
    app.add_middleware(HostAllowList, extra_hosts=settings.accepted_host_names)
    for area in areas():
        for router in area.routers():
            app.include_router(router)
    return app


def create_app_from_environment() -> FastAPI:
    """The service configured by the ``LEDGER_*`` environment alone: the factory each worker
    process of ``ledger serve --workers N`` builds (the command exports its options first).
    The worker's start is done once it is built: what it made is frozen, and the switch
    interval set (log/collection.py)."""
    settings = Settings()
    app = create_app(settings)
    settle_server_process(settings.switch_interval_ms)
    return app
