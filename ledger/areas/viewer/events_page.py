"""``/ui/events``: the newest events, then a live tail by server-sent events (pausable),
optionally of one rollout (``?rollout=<id>``) and one kind (``?kind=<kind>``). A capture event
shows its call's status in words (``failed 429 (rate_limited)``), never by colour alone.

Without script the page is the newest events with a link to reload; the script subscribes
to ``/ui/events/stream?after=<seq>`` (with the same filter) and adds each new event at the top.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ledger.areas.viewer.events_query import CaptureStatus, TailEvent, TailFilter
from ledger.areas.viewer.markup import Html, html, join, query
from ledger.areas.viewer.overview_page import rollout_url
from ledger.gym.ids import is_valid_rollout_id

SHOWN = 100


class InvalidTailQuery(ValueError):
    """A parameter of the tail that is not acceptable (a 400 naming it)."""


def parse_tail(
    params: Mapping[str, str], given: Mapping[str, int], kinds: Sequence[str]
) -> TailFilter:
    for name in ("rollout", "kind"):
        if given.get(name, 0) > 1:
            raise InvalidTailQuery(f"{name}: given {given[name]} times; the tail takes one")
    rollout_id = params.get("rollout") or None
    kind = params.get("kind") or None
    if rollout_id is not None and not is_valid_rollout_id(rollout_id):
        raise InvalidTailQuery(f"rollout: not a rollout id: {rollout_id[:200]!r}")
    if kind is not None and kind not in kinds:
        raise InvalidTailQuery(f"kind: {kind[:100]!r} is not an event kind of this ledger")
    return TailFilter(rollout_id, kind)


def stream_url(flt: TailFilter) -> str:
    return "/ui/events/stream" + query(rollout=flt.rollout_id, kind=flt.kind)


def _status_json(status: CaptureStatus | None) -> dict[str, object] | None:
    if status is None:
        return None
    return {"text": status.text(), "failed": status.failed, "truncated": status.truncated}


def event_json(event: TailEvent) -> str:
    """What the stream sends per event: no payload (a capture can be megabytes)."""
    return json.dumps(
        {
            "seq": event.seq,
            "recorded_at": event.recorded_at.isoformat(),
            "kind": event.kind,
            "rollout_id": event.rollout_id,
            "rollout_url": rollout_url(event.rollout_id) if event.rollout_id else None,
            "generation": event.generation,
            "hash": event.hash,
            "status": _status_json(event.capture),
        },
        separators=(",", ":"),
    )


def status_html(status: CaptureStatus | None) -> Html:
    if status is None:
        return Html("")
    if status.failed:
        return html('<span class="tag failed">✕ {t}</span>', t=status.text())
    if status.truncated:
        return html('<span class="tag truncated">◩ {t}</span>', t=status.text())
    return html('<span class="ok">{t}</span>', t=status.text())


def _row(e: TailEvent) -> Html:
    link = (
        html('<a href="{h}">{id}</a>', h=rollout_url(e.rollout_id), id=e.rollout_id)
        if e.rollout_id
        else Html("")
    )
    return html(
        '<tr data-seq="{seq}"><td class="num">{seq}</td><td>{at}</td><td>{kind}</td>'
        '<td data-col="status">{status}</td><td class="id">{link}</td><td class="num">{gen}</td>'
        '<td class="muted">{hash}</td></tr>',
        seq=e.seq,
        at=e.recorded_at.isoformat(),
        kind=e.kind,
        status=status_html(e.capture),
        link=link,
        gen=e.generation,
        hash=e.hash[:16],
    )


def _filters(flt: TailFilter, kinds: Sequence[str]) -> Html:
    options = join(
        html(
            '<option value="{k}"{sel}>{k}</option>',
            k=kind,
            sel=Html(" selected") if kind == flt.kind else "",
        )
        for kind in kinds
    )
    clear = (
        Html(' <a href="/ui/events">All events</a>')
        if flt.rollout_id is not None or flt.kind is not None
        else ""
    )
    return html(
        '<form class="filters" method="get" action="/ui/events" id="tail-filters">'
        '<label>Rollout<input name="rollout" value="{r}" size="24"'
        ' placeholder="every rollout"></label>'
        '<label>Kind<select name="kind"><option value="">every kind</option>{options}</select>'
        '</label><button type="submit">Filter</button>{clear}</form>',
        r=flt.rollout_id or "",
        options=options,
        clear=clear,
    )


def events_body(
    newest: Sequence[TailEvent], head: int, flt: TailFilter, kinds: Sequence[str]
) -> Html:
    rows = join(_row(e) for e in reversed(newest))
    shown = [
        f"rollout {flt.rollout_id}" if flt.rollout_id else "",
        f"kind {flt.kind}" if flt.kind else "",
    ]
    scope = " and ".join(s for s in shown if s)
    return html(
        "<h1>Live events</h1>{form}"
        '<div class="tail-controls"><button type="button" id="tail-toggle" aria-pressed="false" '
        'aria-controls="tail" hidden>Pause</button><span id="tail-status" role="status"'
        ' aria-live="polite">'
        'Showing the newest events{scope} up to seq {head}. <a href="{reload}">Reload</a></span>'
        '</div><div class="table-wrap"><table id="tail" data-stream="{stream}"'
        ' data-after="{head}">'
        '<thead><tr><th scope="col" class="num">Seq</th><th scope="col">Recorded</th>'
        '<th scope="col">Kind</th><th scope="col">Capture status</th><th scope="col">Rollout'
        '</th><th scope="col" class="num">Gen</th><th scope="col">Hash</th></tr></thead>'
        "<tbody>{rows}</tbody></table></div>",
        form=_filters(flt, kinds),
        scope=f" of {scope}" if scope else "",
        head=head,
        reload="/ui/events" + query(rollout=flt.rollout_id, kind=flt.kind),
        stream=stream_url(flt),
        rows=rows,
    )
