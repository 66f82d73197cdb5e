"""Map the exception tree to responses: every error is ``{"detail": ...}`` with its status."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError

from ledger.errors import LedgerError

log = logging.getLogger(__name__)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(LedgerError)
    async def _ledger_error(request: Request, exc: LedgerError) -> JSONResponse:
        if exc.status_code >= 500:
            log.error("%s %s failed: %s", request.method, request.url.path, exc.message)
        return JSONResponse({"detail": exc.message}, status_code=exc.status_code)

    @app.exception_handler(DBAPIError)
    async def _database_error(request: Request, exc: DBAPIError) -> JSONResponse:
        # A read that reached a database in trouble (down, locked past busy_timeout): the
        # request may be retried; it is not the caller's fault and not a bug of ours.
        log.error("%s %s: database error: %s", request.method, request.url.path, exc.orig)
        return JSONResponse({"detail": "database unavailable; retry later"}, status_code=503)
