"""A pydantic ``ValidationError`` in one bounded line: the HTTP bodies' 422s and the CLI's
settings errors say it the same way.

Free of the web framework: the CLI and the projector process import it without FastAPI.
"""

from __future__ import annotations

from pydantic import ValidationError

from ledger.app.http.json_body import MAX_SHOWN, location

# A message is cut to this many characters: an error body stays a few KiB whatever the request
# (issue 14).
MAX_MESSAGE_CHARS = 300


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# Past this many errors none is listed: turning each into a Python dict would cost far more
# memory than the body (pydantic has no way to ask for the first few only).
MAX_ERRORS_LISTED = 1000


def too_many_errors(exc: ValidationError, prefix: str) -> str:
    return (
        f"{prefix}: {exc.error_count()} validation errors, too many to list "
        "(unknown keys or bad items in bulk?)"
    )


def describe_validation_error(exc: ValidationError, prefix: str) -> str:
    """``<prefix>.field: message; ...`` for the first errors only (an error body is bounded)."""
    if exc.error_count() > MAX_ERRORS_LISTED:
        return too_many_errors(exc, prefix)
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    parts = []
    for error in errors[:MAX_SHOWN]:
        message = str(error["msg"])
        if error["type"] == "value_error":
            message = message.removeprefix("Value error, ")
        parts.append(f"{location(prefix, tuple(error['loc']))}: {_cut(message, MAX_MESSAGE_CHARS)}")
    more = len(errors) - MAX_SHOWN
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
