"""A captured payload as highlighted, escaped JSON (server-side: no script needed to read it).

Captures can be large; past ``MAX_CHARS`` of output the rest is cut with a note, so a page
never costs unbounded memory or time.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.areas.viewer.markup import Html, esc

MAX_CHARS = 400_000
INDENT = "  "


class _Out:
    def __init__(self, limit: int) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.limit = limit
        self.cut = False

    def add(self, text: str) -> None:
        if self.cut:
            return
        self.size += len(text)
        if self.size > self.limit:
            self.cut = True
            return
        self.parts.append(text)


def _span(cls: str, text: str) -> str:
    return f'<span class="{cls}">{esc(text)}</span>'


def _write(out: _Out, value: Any, depth: int) -> None:
    if out.cut:
        return
    pad = INDENT * (depth + 1)
    if isinstance(value, dict):
        if not value:
            out.add("{}")
            return
        out.add("{\n")
        for i, (key, item) in enumerate(value.items()):
            out.add(pad + _span("j-key", json.dumps(str(key))) + ": ")
            _write(out, item, depth + 1)
            out.add(",\n" if i < len(value) - 1 else "\n")
        out.add(INDENT * depth + "}")
    elif isinstance(value, list):
        if not value:
            out.add("[]")
            return
        out.add("[\n")
        for i, item in enumerate(value):
            out.add(pad)
            _write(out, item, depth + 1)
            out.add(",\n" if i < len(value) - 1 else "\n")
        out.add(INDENT * depth + "]")
    elif isinstance(value, str):
        out.add(_span("j-str", json.dumps(value, ensure_ascii=False)))
    elif isinstance(value, bool) or value is None:
        out.add(_span("j-lit", json.dumps(value)))
    elif isinstance(value, (int, float)):
        out.add(_span("j-num", json.dumps(value)))
    else:
        out.add(_span("j-str", json.dumps(str(value))))


def json_html(value: Any, *, limit: int = MAX_CHARS) -> Html:
    out = _Out(limit)
    _write(out, value, 0)
    note = (
        f'\n<span class="error">… cut at {limit:,} characters; read the whole call from '
        "/v1/rollouts/&lt;id&gt;/model-calls</span>"
        if out.cut
        else ""
    )
    return Html('<pre class="json">' + "".join(out.parts) + note + "</pre>")
