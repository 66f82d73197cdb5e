"""Map the exception tree to responses: every error is ``{"detail": ...}`` with its status."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError

from ledger.log.errors import LedgerError

log = logging.getLogger(__name__)


def _json_safe(value: Any) -> Any:
    """NaN/Infinity are not JSON: an error echoing such an input must not become a 500."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


class ErrorResponse(JSONResponse):
    """Errors echo caller input; ``ensure_ascii`` keeps a lone surrogate from breaking the body."""

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode()


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(LedgerError)
    async def _ledger_error(request: Request, exc: LedgerError) -> ErrorResponse:
        if exc.status_code >= 500:
            log.error("%s %s failed: %s", request.method, request.url.path, exc.message)
        return ErrorResponse({"detail": exc.message}, status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> ErrorResponse:
        # FastAPI's own 422 shape, made safe for inputs that JSON cannot carry.
        detail = _json_safe(jsonable_encoder(exc.errors()))
        return ErrorResponse({"detail": detail}, status_code=422)

    @app.exception_handler(DBAPIError)
    async def _database_error(request: Request, exc: DBAPIError) -> ErrorResponse:
        # A read that reached a database in trouble (down, locked past busy_timeout): the
        # request may be retried; it is not the caller's fault and not a bug of ours.
        log.error("%s %s: database error: %s", request.method, request.url.path, exc.orig)
        return ErrorResponse({"detail": "database unavailable; retry later"}, status_code=503)
