"""Safe HTML building: every value is escaped unless it is already ``Html``.

Captures are untrusted input. Pages are built from ``Html`` fragments only, and ``html()``
escapes whatever is not one, so forgetting to escape renders text instead of markup.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable
from urllib.parse import urlencode


class Html(str):
    """A fragment known to be safe markup."""

    __slots__ = ()


def esc(value: object) -> Html:
    kind = type(value)
    if kind is Html:
        return value  # type: ignore[return-value]
    if kind is int or kind is float:
        return Html(str(value))  # digits, sign, '.', 'e', 'inf': nothing to escape
    if value is None:
        return Html("")
    if isinstance(value, Html):
        return value
    return Html(_html.escape(str(value), quote=True))


def html(template: str, **values: object) -> Html:
    """``template`` (trusted, ``{name}`` fields) with each value escaped unless ``Html``."""
    return Html(template.format(**{name: esc(value) for name, value in values.items()}))


def join(parts: Iterable[object], separator: str = "") -> Html:
    return Html(separator.join(esc(part) for part in parts))


def query(**params: object) -> str:
    """A query string of the non-empty parameters (``?a=1&b=x``, or ``""``)."""
    kept = {k: str(v) for k, v in params.items() if v is not None and v != ""}
    return "?" + urlencode(kept) if kept else ""


def number(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, int) or digits == 0:
        return f"{round(value):,}"
    return f"{value:,.{digits}f}"
