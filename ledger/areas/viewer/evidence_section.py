"""The rollout page's "Call evidence" section: each call of the generation with the seq of its
lineage row, its intent and its capture, and what the ledger names (missing, pending, lineage
row missing), from the evidence area's document (``GET /v1/rollouts/{id}/call-evidence``).

The calls the ledger names come first; a rollout with more calls than ``EVIDENCE_SHOWN`` links
to the JSON route for the rest."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ledger.areas.evidence.findings import CAPTURE_MISSING, CAPTURE_PENDING, LINEAGE_ROW_MISSING
from ledger.areas.viewer.markup import Html, html, join, number

EVIDENCE_SHOWN = 200
# The finding's words and tag class on the page.
NAMED: dict[str, tuple[str, str]] = {
    CAPTURE_MISSING: ("capture missing", "failed"),
    CAPTURE_PENDING: ("capture pending", "pending"),
    LINEAGE_ROW_MISSING: ("lineage row missing", "failed"),
}


def _seq(seq: int | None, what: str = "") -> Html:
    if seq is None:
        return Html('<span class="muted">–</span>')
    return html("#{seq}{what}", seq=seq, what=f" {what}" if what else "")


def _named(finding: str | None) -> Html:
    if finding is None:
        return Html('<span class="tag ok">complete</span>')
    words, cls = NAMED.get(finding, (finding, "failed"))
    return html('<span class="tag {cls}">{words}</span>', cls=cls, words=words)


def _coverage(document: dict[str, Any]) -> Html:
    c = document["coverage"]
    note = Html("")
    if c["admitted"] and not c["captured"]:
        note = Html(
            ' <span class="muted">Nothing was captured: with observability off (Gym\'s training'
            " default) that is expected.</span>"
        )
    return html(
        '<p id="evidence-coverage">{admitted} admitted, {captured} captured,'
        ' <span class="{mcls}">{missing} missing</span>, {pending} pending,'
        " {without} captures without a lineage row (grace window {grace} s).{note}</p>",
        admitted=number(c["admitted"]),
        captured=number(c["captured"]),
        mcls="failed" if c["missing"] else "",
        missing=number(c["missing"]),
        pending=number(c["pending"]),
        without=number(c["captures_without_row"]),
        grace=f"{document['grace_s']:g}",
        note=note,
    )


def evidence_section(rollout_id: str, document: dict[str, Any] | None) -> Html:
    heading = Html('<h2 id="evidence-heading">Call evidence</h2>')
    if document is None or not document["calls"]:
        return join(
            [
                heading,
                Html(
                    '<p class="muted" id="evidence-coverage">No lineage row, intent or capture'
                    " of a model call in this generation.</p>"
                ),
            ]
        )
    calls = sorted(document["calls"], key=lambda call: call["finding"] is None)
    shown = calls[:EVIDENCE_SHOWN]
    more = Html("")
    if len(calls) > len(shown):
        more = html(
            '<p class="muted">The first {n} of {total} calls are shown (named ones first); all'
            ' of them: <a href="/v1/rollouts/{id}/call-evidence">the call evidence</a>.</p>',
            n=len(shown),
            total=number(len(calls)),
            id=quote(rollout_id, safe=""),
        )
    rows = join(
        html(
            '<tr data-call-id="{id}"><td class="id">{id}</td><td>{row}</td><td>{intent}</td>'
            "<td>{capture}</td><td>{named}</td></tr>",
            id=call["model_call_id"],
            row=_seq(call["row_seq"], call["row_kind"] or ""),
            intent=_seq(call["intent_seq"]),
            capture=_seq(call["capture_seq"]),
            named=_named(call["finding"]),
        )
        for call in shown
    )
    table = html(
        '<div class="table-wrap"><table id="call-evidence"><thead><tr>'
        '<th scope="col">Model call</th><th scope="col">Lineage row</th>'
        '<th scope="col">Intent</th><th scope="col">Capture</th><th scope="col">Named</th>'
        "</tr></thead><tbody>{rows}</tbody></table></div>",
        rows=rows,
    )
    return join([heading, _coverage(document), more, table])
