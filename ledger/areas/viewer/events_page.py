"""``/ui/events``: the newest events, then a live tail by server-sent events (pausable).

Without script the page is the newest events with a link to reload; the script subscribes
to ``/ui/events/stream?after=<seq>`` and adds each new event at the top.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ledger.areas.viewer.events_query import TailEvent
from ledger.areas.viewer.markup import Html, html, join
from ledger.areas.viewer.overview_page import rollout_url

SHOWN = 100


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
        },
        separators=(",", ":"),
    )


def _row(e: TailEvent) -> Html:
    link = (
        html('<a href="{h}">{id}</a>', h=rollout_url(e.rollout_id), id=e.rollout_id)
        if e.rollout_id
        else Html("")
    )
    return html(
        '<tr data-seq="{seq}"><td class="num">{seq}</td><td>{at}</td><td>{kind}</td>'
        '<td class="id">{link}</td><td class="num">{gen}</td><td class="muted">{hash}</td></tr>',
        seq=e.seq,
        at=e.recorded_at.isoformat(),
        kind=e.kind,
        link=link,
        gen=e.generation,
        hash=e.hash[:16],
    )


def events_body(newest: Sequence[TailEvent], head: int) -> Html:
    rows = join(_row(e) for e in reversed(newest))
    return html(
        "<h1>Live events</h1>"
        '<div class="tail-controls"><button type="button" id="tail-toggle" aria-pressed="false" '
        'aria-controls="tail" hidden>Pause</button><span id="tail-status" role="status"'
        ' aria-live="polite">'
        'Showing the newest events up to seq {head}. <a href="/ui/events">Reload</a></span></div>'
        '<div class="table-wrap"><table id="tail" data-stream="/ui/events/stream"'
        ' data-after="{head}">'
        '<thead><tr><th scope="col" class="num">Seq</th><th scope="col">Recorded</th>'
        '<th scope="col">Kind</th><th scope="col">Rollout</th><th scope="col" class="num">Gen</th>'
        '<th scope="col">Hash</th></tr></thead><tbody>{rows}</tbody></table></div>',
        head=head,
        rows=rows,
    )
