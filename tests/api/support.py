"""Helpers for API tests that need their own settings or an extra route."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from ledger.app.bootstrap import Ledger
from ledger.app.config import Settings
from ledger.app.http.app import create_app


@asynccontextmanager
async def running_app(
    settings: Settings, customise: Callable[[FastAPI], None] | None = None
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """``create_app(settings)`` with its lifespan running, and an in-process HTTP client."""
    application = create_app(settings)
    if customise is not None:
        customise(application)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield application, http


def ledger_of(app: FastAPI) -> Ledger:
    running: Ledger = app.state.ledger
    return running
