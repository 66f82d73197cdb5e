"""Client-chosen text in a log line: made harmless before it is formatted, so a CR/LF (or any
control character) can never start a forged line."""

from __future__ import annotations

import json

MAX_LOGGED_CHARS = 200


def loggable(value: object) -> str:
    """Visible ASCII as is; anything else JSON-escaped (``\\r``, ``\\n``, ``\\u2028``...);
    long values cut short."""
    text = str(value)
    if len(text) > MAX_LOGGED_CHARS:
        text = text[:MAX_LOGGED_CHARS] + "..."
    if text.isascii() and text.isprintable():
        return text
    return json.dumps(text)[1:-1]
