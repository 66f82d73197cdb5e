"""Map the exception tree to responses: every error is ``{"detail": ...}`` with its status."""

from __future__ import annotations

import json
import logging
import math
import reprlib
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError

from ledger.app.http.validation_errors import MAX_MESSAGE_CHARS
from ledger.log.errors import LedgerError, ViewsBehind, damage_of
from ledger.log.log_text import loggable

log = logging.getLogger(__name__)

# A 422 shows this many errors; an echoed input is cut to this many characters (a message to
# MAX_MESSAGE_CHARS): an error body stays a few KiB whatever the request (issue 14).
MAX_ERRORS_SHOWN = 10
MAX_INPUT_CHARS = 120


# reprlib stops early: a bounded echo of a huge list costs no copy of it.
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 2
_SHORT_REPR.maxlist = _SHORT_REPR.maxdict = _SHORT_REPR.maxtuple = 4
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 60


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def bounded_error(error: Any) -> dict[str, Any]:
    """FastAPI's error shape (type, loc, msg, input) with the input cut short: it may be the
    whole body."""
    kept = {key: error[key] for key in ("type", "loc", "msg") if key in error}
    kept["msg"] = _cut(str(kept.get("msg", "")), MAX_MESSAGE_CHARS)
    if "loc" in kept:
        kept["loc"] = [
            _cut(str(part), MAX_INPUT_CHARS) if isinstance(part, str) else part
            for part in kept["loc"]
        ]
    if "input" in error:
        value = error["input"]
        if isinstance(value, str):
            kept["input"] = _cut(value, MAX_INPUT_CHARS)
        elif isinstance(value, bool | int | float) or value is None:
            kept["input"] = (
                value if not isinstance(value, int) or abs(value) < 2**63 else str(value)
            )
        else:
            kept["input"] = _cut(_SHORT_REPR.repr(value), MAX_INPUT_CHARS)
    return kept


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
            log.error(
                "%s %s failed: %s",
                request.method,
                loggable(request.url.path),
                loggable(exc.message),
            )
        headers = None
        if isinstance(exc, ViewsBehind):
            headers = {"Retry-After": str(exc.retry_after_s)}
        return ErrorResponse({"detail": exc.message}, status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> ErrorResponse:
        # FastAPI's own 422 shape, made safe for inputs that JSON cannot carry.
        errors = exc.errors()
        detail = _json_safe(jsonable_encoder([bounded_error(e) for e in errors[:MAX_ERRORS_SHOWN]]))
        return ErrorResponse({"detail": detail}, status_code=422)

    @app.exception_handler(DBAPIError)
    async def _database_error(request: Request, exc: DBAPIError) -> ErrorResponse:
        # A read that reached a database in trouble (down, locked past busy_timeout): the
        # request may be retried; it is not the caller's fault and not a bug of ours.
        log.error("%s %s: database error: %s", request.method, loggable(request.url.path), exc.orig)
        damage = damage_of(exc)
        if damage is not None:
            detail = f"the database is damaged ({damage}): it must be restored from a backup"
            return ErrorResponse({"detail": detail}, status_code=503)
        return ErrorResponse({"detail": "database unavailable; retry later"}, status_code=503)
