"""Bearer-token checks. Compared in constant time; the header must be exactly ``Bearer <token>``.

The dependencies are ``async def`` although they never await: FastAPI runs a plain ``def``
dependency in a worker thread, a thread hop per request that costs more than the check.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request

from ledger.app.http.deps import get_ledger
from ledger.log.errors import Unauthorized

CONTROL_UNAUTHORIZED = "missing or invalid control-plane bearer token"


def bearer_matches(header: str | None, token: str) -> bool:
    if header is None:
        return False
    return hmac.compare_digest(header.encode(), f"Bearer {token}".encode())


def authorization_of(request: Request) -> str | None:
    """The Authorization header; repeated headers are joined with ", " (as Gym's middleware
    joins them), so an ambiguous pair never matches a token: fail closed."""
    values = request.headers.getlist("authorization")
    if not values:
        return None
    return ", ".join(values)


async def require_control(request: Request) -> None:
    ledger = get_ledger(request)
    if not bearer_matches(authorization_of(request), ledger.control_token):
        raise Unauthorized(CONTROL_UNAUTHORIZED)


async def require_ingest(request: Request) -> None:
    token = get_ledger(request).settings.ingest_token
    if token is not None and not bearer_matches(
        authorization_of(request), token.get_secret_value()
    ):
        raise Unauthorized("missing or invalid ingest bearer token")


async def require_read(request: Request) -> None:
    token = get_ledger(request).settings.read_token
    if token is not None and not bearer_matches(
        authorization_of(request), token.get_secret_value()
    ):
        raise Unauthorized("missing or invalid read bearer token")


async def require_metrics(request: Request) -> None:
    """``/metrics``: open when neither the read token nor the metrics token is set; else
    either one. A scraper can hold a token that reads no rollout (``LEDGER_METRICS_TOKEN``)."""
    settings = get_ledger(request).settings
    tokens = [t.get_secret_value() for t in (settings.read_token, settings.metrics_token) if t]
    if not tokens:
        return
    header = authorization_of(request)
    # Every token is compared (no early exit), so the time does not tell which one was close.
    matches = [bearer_matches(header, token) for token in tokens]
    if not any(matches):
        raise Unauthorized("missing or invalid read or metrics bearer token")


ControlAuth = Annotated[None, Depends(require_control)]
IngestAuth = Annotated[None, Depends(require_ingest)]
ReadAuth = Annotated[None, Depends(require_read)]
MetricsAuth = Annotated[None, Depends(require_metrics)]
