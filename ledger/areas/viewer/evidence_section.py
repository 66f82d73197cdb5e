"""The rollout page's "Call evidence" section: each call of the generation with the seq of its
lineage row, its intent and its capture, and what the ledger names (missing, pending, lineage
row missing), as ``GET /v1/rollouts/{id}/call-evidence`` names them.

The evidence area reads the coverage and the first ``EVIDENCE_SHOWN`` calls, named ones first
(evidence/page_query.py); a rollout with more calls links to the JSON route for the rest."""

from __future__ import annotations

from urllib.parse import quote

from ledger.areas.evidence.findings import (
    CAPTURE_MISSING,
    CAPTURE_PENDING,
    LINEAGE_ROW_MISSING,
    CallEvidence,
)
from ledger.areas.evidence.page_query import EvidencePage
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


def _named(call: CallEvidence, finding: str | None) -> Html:
    if finding is None and call.row_seq is not None and call.capture_seq is not None:
        return Html('<span class="tag ok">complete</span>')
    if finding is None:
        # A capture alone on a rollout without lineage rows (the capture proxy, no plug-in).
        return Html('<span class="muted">nothing named</span>')
    words, cls = NAMED.get(finding, (finding, "failed"))
    return html('<span class="tag {cls}">{words}</span>', cls=cls, words=words)


def _coverage(evidence: EvidencePage) -> Html:
    c = evidence.coverage
    note = Html("")
    if c.admitted and not c.captured:
        note = Html(
            ' <span class="muted">Nothing was captured: with observability off (Gym\'s training'
            " default) that is expected.</span>"
        )
    return html(
        '<p id="evidence-coverage">{admitted} admitted, {captured} captured,'
        ' <span class="{mcls}">{missing} missing</span>, {pending} pending,'
        " {without} captures without a lineage row (grace window {grace} s).{note}</p>",
        admitted=number(c.admitted),
        captured=number(c.captured),
        mcls="failed" if c.missing else "",
        missing=number(c.missing),
        pending=number(c.pending),
        without=number(c.captures_without_row),
        grace=f"{evidence.grace_s:g}",
        note=note,
    )


def evidence_section(evidence: EvidencePage | None) -> Html:
    heading = Html('<h2 id="evidence-heading">Call evidence</h2>')
    if evidence is None or not evidence.calls:
        return join(
            [
                heading,
                Html(
                    '<p class="muted" id="evidence-coverage">No lineage row, intent or capture'
                    " of a model call in this generation.</p>"
                ),
            ]
        )
    more = Html("")
    if evidence.calls_total > len(evidence.calls):
        more = html(
            '<p class="muted">The first {n} of {total} calls are shown (named ones first); all'
            ' of them: <a href="/v1/rollouts/{id}/call-evidence">the call evidence</a>.</p>',
            n=len(evidence.calls),
            total=number(evidence.calls_total),
            id=quote(evidence.rollout_id, safe=""),
        )
    rows = join(
        html(
            '<tr data-call-id="{id}"><td class="id">{id}</td><td>{row}</td><td>{intent}</td>'
            "<td>{capture}</td><td>{named}</td></tr>",
            id=named.call.model_call_id,
            row=_seq(named.call.row_seq, named.call.row_kind or ""),
            intent=_seq(named.call.intent_seq),
            capture=_seq(named.call.capture_seq),
            named=_named(named.call, named.finding),
        )
        for named in evidence.calls
    )
    table = html(
        '<div class="table-wrap"><table id="call-evidence"><thead><tr>'
        '<th scope="col">Model call</th><th scope="col">Lineage row</th>'
        '<th scope="col">Intent</th><th scope="col">Capture</th><th scope="col">Named</th>'
        "</tr></thead><tbody>{rows}</tbody></table></div>",
        rows=rows,
    )
    return join([heading, _coverage(evidence), more, table])
