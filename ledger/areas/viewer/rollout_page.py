"""``/ui/rollouts/{id}``: one rollout (timeline, calls, tools, invocation tree with its gaps,
call evidence, manifest and fence, events). Request and response bodies are loaded on demand.

The calls and the events are paged (``?calls_from=<call index>&events_before=<seq>``, plain
links, no script needed); the facts card counts the whole rollout."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ledger.app.http.deps import MAX_SEQ
from ledger.areas.evidence.page_query import EvidencePage
from ledger.areas.viewer.copy_field import copy_field
from ledger.areas.viewer.evidence_section import evidence_section
from ledger.areas.viewer.health_words import unobserved_note, verdict_words
from ledger.areas.viewer.markup import Html, html, join, number, query
from ledger.areas.viewer.overview_page import rollout_url
from ledger.areas.viewer.rollout_query import (
    CALLS_PER_PAGE,
    EVENTS_PER_PAGE,
    Call,
    Gap,
    InvalidRolloutQuery,
    Invocation,
    PageAt,
    RolloutDetail,
    ToolCall,
)
from ledger.areas.viewer.timeline import call_owners, invocation_order, timeline_svg
from ledger.areas.viewer.transcript_page import tabs, transcript_url
from ledger.areas.viewer.verdicts import Judgement, health_rules

# The health section lists at most this many findings that are not shown under a call row.
FINDINGS_SHOWN = 100
# call_index is a 32-bit integer on both backends.
MAX_CALL_INDEX = 2**31 - 1


def _cursor(params: Mapping[str, str], name: str, ceiling: int, what: str) -> int | None:
    text = params.get(name) or None
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) > ceiling:
        raise InvalidRolloutQuery(f"{name}: expected {what} (a non-negative integer)")
    return int(text)


def parse_page_at(params: Mapping[str, str]) -> PageAt:
    """Where the rollout page starts, checked: a bad value is a 400 naming the parameter."""
    return PageAt(
        calls_from=_cursor(params, "calls_from", MAX_CALL_INDEX, "a call index"),
        events_before=_cursor(params, "events_before", MAX_SEQ, "an event seq"),
    )


def page_url(
    rollout_id: str, at: PageAt, anchor: str, *, calls_from: int | None, events_before: int | None
) -> str:
    """The rollout page at other pages (``calls_from``/``events_before`` replace ``at``'s
    when given; 0 for the first calls / the newest events), scrolled to ``anchor``."""
    calls = at.calls_from if calls_from is None else calls_from
    events = at.events_before if events_before is None else events_before
    return (
        rollout_url(rollout_id)
        + query(calls_from=calls or None, events_before=events or None)
        + f"#{anchor}"
    )


def payload_url(rollout_id: str, call_index: int) -> str:
    return f"{rollout_url(rollout_id)}/calls/{call_index}/payload"


def _when(value: datetime | None) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _ms(value: float | None) -> str:
    return number(value) if value is None or value >= 10 else f"{value:.1f}"


def _status(call: Call) -> Html:
    if call.damaged:
        return Html('<span class="tag failed">damaged</span>')
    if call.failed:
        return html('<span class="tag failed">failed {c}</span>', c=call.status_code or "")
    if call.truncated:
        return html('<span class="tag truncated">truncated</span> {c}', c=call.status_code or "")
    return html('<span class="ok">{c}</span>', c=call.status_code or "–")


def _health_finding(finding: dict[str, Any], where: Html | None = None) -> Html:
    detail = json.dumps(finding.get("detail") or {}, sort_keys=True)
    return html(
        '<div class="finding" data-check="{check}"><strong>{check}</strong>{where} '
        '<span class="muted">{detail}</span></div>',
        check=finding.get("check"),
        where=where or Html(""),
        detail=detail if len(detail) <= 400 else detail[:400] + "…",
    )


def _call_key(finding: dict[str, Any]) -> str | None:
    locator = finding.get("locator")
    if isinstance(locator, dict) and isinstance(locator.get("call_id"), str):
        return str(locator["call_id"])
    return None


def _calls_table(
    d: RolloutDetail, owners: dict[int, str | None], by_call: dict[str, list[Html]]
) -> Html:
    rows = []
    for c in d.calls:
        about = [*by_call.get(c.model_call_id or "", []), *by_call.get(c.response_id or "", [])]
        rows.append(
            html(
                '<tr id="call-{i}" data-call="{i}"><td class="num">{i}</td>'
                '<td class="opt">{model}</td><td class="opt">{inv}</td>'
                '<td data-col="status">{status}</td><td class="opt">{finish}</td>'
                '<td class="opt">{err}</td><td class="num" data-col="tokens-in">{tin}</td>'
                '<td class="num" data-col="tokens-out">{tout}</td>'
                '<td class="num opt">{cached}</td><td class="num opt">{reason}</td>'
                '<td class="num opt">{ttft}</td><td class="num" data-col="latency">{lat}</td>'
                '<td class="num opt"><a'
                ' href="/v1/events?after={before}&amp;limit=1">#{seq}</a></td></tr>'
                '<tr class="payload-row"><td></td><td colspan="12">'
                '<details class="json" data-src="{src}?fragment=1"><summary>Request and response'
                '</summary><div class="json-body"><a href="{src}">Open the request and response'
                '</a></div></details><a class="to-turn" href="{turn}">In the transcript</a>'
                "{about}</td></tr>",
                turn=transcript_url(d.rollout_id, d.at.calls_from) + f"#turn-{c.call_index}",
                about=join(about),
                i=c.call_index,
                model=c.model or c.model_ref_name or "–",
                inv=owners.get(c.call_index) or "–",
                status=_status(c),
                finish=c.finish_reason or "–",
                err=c.error_category or "–",
                tin=number(c.tokens_in),
                tout=number(c.tokens_out),
                cached=number(c.cached_tokens),
                reason=number(c.tokens_reasoning),
                ttft=_ms(c.ttft_ms),
                lat=_ms(c.latency_ms),
                before=c.seq - 1,
                seq=c.seq,
                src=payload_url(d.rollout_id, c.call_index),
            )
        )
    for model_call_id in d.pending if d.calls_next is None else []:
        rows.append(
            html(
                # Two cells, like the payload rows: a narrow screen hides columns, and cells
                # spanning hidden ones would widen the table.
                '<tr class="pending"><td>–</td><td colspan="12"><span class="tag pending">'
                "pending</span> {id}: announced, not landed yet</td></tr>",
                id=model_call_id,
            )
        )
    if not rows:
        rows.append(Html('<tr><td colspan="13" class="muted">No model call captured.</td></tr>'))
    return html(
        # Narrow screens keep #, status, tokens and latency; the checkbox (no script needed)
        # shows the other columns (.opt) on demand.
        '{pager}<input type="checkbox" id="calls-all-columns" class="all-columns">'
        '<label for="calls-all-columns" class="all-columns">Show all columns</label>'
        '<div class="table-wrap"><table id="calls"><thead><tr>'
        '<th scope="col" class="num">#</th>'
        '<th scope="col" class="opt">Model</th><th scope="col" class="opt">Invocation</th>'
        '<th scope="col">Status</th>'
        '<th scope="col" class="opt">Finish</th><th scope="col" class="opt">Error category</th>'
        '<th scope="col" class="num">Tokens in</th><th scope="col" class="num">Out</th>'
        '<th scope="col" class="num opt">Cached</th><th scope="col" class="num opt">Reasoning'
        '</th><th scope="col" class="num opt">TTFT ms</th>'
        '<th scope="col" class="num">Latency ms</th>'
        '<th scope="col" class="num opt">Event</th></tr></thead><tbody>{rows}</tbody></table>'
        "</div>"
        "{pending_more}{pager}",
        rows=join(rows),
        pager=_calls_pager(d),
        pending_more=(
            html(
                '<p class="muted">{n} more pending calls are not listed.</p>',
                n=d.pending_count - len(d.pending),
            )
            if d.calls_next is None and d.pending_count > len(d.pending)
            else ""
        ),
    )


def _calls_pager(d: RolloutDetail) -> Html:
    if not d.paged:
        return Html("")
    shown = (
        f"Calls #{d.calls[0].call_index} to #{d.calls[-1].call_index}"
        if d.calls
        else "No call on this page"
    )
    links = [html('<span class="muted">{s} of {n}</span>', s=shown, n=number(d.call_count))]
    if d.calls_previous is not None:
        links.append(
            html(
                '<a href="{h}" data-pager="calls-previous">Previous {n} calls</a>',
                h=page_url(
                    d.rollout_id,
                    d.at,
                    "calls-heading",
                    calls_from=d.calls_previous,
                    events_before=None,
                ),
                n=CALLS_PER_PAGE,
            )
        )
    if d.calls_next is not None:
        links.append(
            html(
                '<a href="{h}" data-pager="calls-next">Next calls</a>',
                h=page_url(
                    d.rollout_id,
                    d.at,
                    "calls-heading",
                    calls_from=d.calls_next,
                    events_before=None,
                ),
            )
        )
    return html(
        '<nav class="pager" aria-label="Pages of model calls">{links}</nav>', links=join(links)
    )


def _tools_note(d: RolloutDetail) -> Html:
    if d.tools_of_page:
        return html(
            '<p class="muted" id="tools-note">The {k} of {n} tool calls that overlap this page\'s'
            " model calls.</p>",
            k=len(d.tools),
            n=number(d.tool_count),
        )
    if d.tool_count > len(d.tools):
        return html(
            '<p class="muted" id="tools-note">The first {k} of {n} tool calls.</p>',
            k=len(d.tools),
            n=number(d.tool_count),
        )
    return Html("")


def _tools_table(tools: Sequence[ToolCall]) -> Html:
    if not tools:
        return Html('<p class="muted">No tool call observed.</p>')
    rows = join(
        html(
            '<tr id="tool-{p}" data-tool="{p}"><td'
            ' class="num">{p}</td><td>{name}</td><td>{inv}</td>'
            '<td><span class="{cls}">{status}</span></td><td>{err}</td><td'
            ' class="num">{dur}</td></tr>',
            p=t.position,
            name=t.tool_name or t.tool_call_id,
            inv=t.invocation_id,
            cls="failed" if t.failed else "ok",
            status=t.status,
            err=t.error_type or "–",
            dur=_ms(t.duration),
        )
        for t in tools
    )
    return html(
        '<div class="table-wrap"><table id="tools"><thead><tr><th scope="col" class="num">#</th>'
        '<th scope="col">Tool</th><th scope="col">Invocation</th><th scope="col">Status</th>'
        '<th scope="col">Error</th><th scope="col" class="num">Duration ms</th></tr></thead>'
        "<tbody>{rows}</tbody></table></div>",
        rows=rows,
    )


def _finding(gap: Gap) -> Html:
    return html(
        '<div class="finding" data-gap="{code}"><strong>{code}</strong> <span class="muted">({doc})'
        "</span> {detail}</div>",
        code=gap.code,
        doc=gap.document,
        detail=gap.detail or "",
    )


def _tree(d: RolloutDetail, findings: dict[str | None, list[Html]]) -> Html:
    ordered = invocation_order(d.invocations)
    if not ordered:
        return Html('<p class="muted">No invocation observed.</p>')
    items = []
    for inv, depth in ordered:
        items.append(
            _tree_item(
                inv,
                depth,
                # The calls the invocation lists (the page holds one page of the captured ones).
                len(set(inv.model_call_ids)) or len(set(inv.response_ids)),
                d.tools_per_invocation.get(inv.invocation_id, 0),
                findings.get(inv.invocation_id, []),
            )
        )
    return html('<ul class="tree" id="invocations">{items}</ul>', items=join(items))


def _tree_item(inv: Invocation, depth: int, calls: int, tools: int, findings: list[Html]) -> Html:
    spawned = (
        f" spawned by tool call {inv.spawned_by_tool_call_id}"
        if inv.spawned_by_tool_call_id
        else ""
    )
    cls = "failed" if inv.status == "failed" or inv.error_type else "ok"
    return html(
        '<li class="d{indent}" data-invocation="{id}"><strong>{kind}</strong> {id} '
        '<span class="{cls}">{status}</span>{err} · {calls} calls · {tools} tools{dur}'
        '<span class="muted">{spawned}</span>{findings}</li>',
        indent=min(depth, 8),
        kind="subagent" if inv.parent_invocation_id else "agent",
        id=inv.invocation_id,
        cls=cls,
        status=inv.status,
        err=f" ({inv.error_type})" if inv.error_type else "",
        calls=calls,
        tools=tools,
        dur="" if inv.duration_ms is None else f" · {inv.duration_ms:,.0f} ms",
        spawned=spawned,
        findings=join(findings),
    )


def _manifest(d: RolloutDetail) -> Html:
    if d.state == "retired":
        fence = html(
            '<p id="fence"><span class="tag retired">fenced</span> retired at {at} (event #{seq}): '
            "the manifest answers 410 and late rows are discarded.</p>",
            at=_when(d.fenced_at),
            seq=d.fenced_seq if d.fenced_seq is not None else "?",
        )
    else:
        fence = Html('<p id="fence"><span class="tag ok">open</span> live: not fenced.</p>')
    if not d.manifest:
        return Html(fence + Html('<p class="muted">No ledger row recorded.</p>'))
    more = Html("")
    if d.manifest_more:
        more = html(
            '<p class="muted">The first {n} ledger rows are shown; all of them: <a'
            ' href="/training-token-capture/control/rollouts/{id}/manifest">the manifest</a>.</p>',
            n=len(d.manifest),
            id=quote(d.rollout_id, safe=""),
        )
    rows = join(
        html(
            '<tr><td class="num">{seq}</td><td>{kind}</td><td'
            ' class="id">{call}</td><td>{parent}</td>'
            '<td class="{rcls}">{reason}</td><td class="num">{cum}</td><td'
            ' class="id">{key}</td></tr>',
            seq=m.seq,
            kind=m.row_kind,
            call=m.model_call_id,
            parent=m.parent_call_id or "–",
            rcls="failed" if m.failure_reason else "",
            reason=m.failure_reason or "–",
            cum=number(m.cum_len),
            key=m.staging_key or "–",
        )
        for m in d.manifest
    )
    return join([fence, more, _manifest_table(rows)])


def _manifest_table(rows: Html) -> Html:
    return html(
        '<div class="table-wrap"><table id="manifest"><thead><tr><th scope="col"'
        ' class="num">Seq</th>'
        '<th scope="col">Kind</th><th scope="col">Model call</th><th scope="col">Parent</th>'
        '<th scope="col">Failure</th><th scope="col" class="num">Cum len</th>'
        '<th scope="col">Staging key</th></tr></thead><tbody>{rows}</tbody></table></div>',
        rows=rows,
    )


def _events(d: RolloutDetail) -> Html:
    rows = join(
        html(
            '<tr><td class="num">{seq}</td><td>{at}</td><td>{kind}</td><td class="num">{gen}</td>'
            "<td><code>{hash}</code></td></tr>",
            seq=e.seq,
            at=_when(e.recorded_at),
            kind=e.kind,
            gen=e.generation,
            hash=e.hash,
        )
        for e in d.events
    )
    return join([_events_pager(d), _events_table(rows)])


def _events_pager(d: RolloutDetail) -> Html:
    if d.events_older is None and d.events_newer is None and d.at.events_before is None:
        return Html("")
    links = []
    if d.events_older is not None:
        links.append(
            html(
                '<a href="{h}" data-pager="events-older">Older {n} events</a>',
                h=page_url(
                    d.rollout_id,
                    d.at,
                    "events-heading",
                    calls_from=None,
                    events_before=d.events_older,
                ),
                n=EVENTS_PER_PAGE,
            )
        )
    if d.events_newer is not None:
        links.append(
            html(
                '<a href="{h}" data-pager="events-newer">Newer events</a>',
                h=page_url(
                    d.rollout_id,
                    d.at,
                    "events-heading",
                    calls_from=None,
                    events_before=d.events_newer,
                ),
            )
        )
    if d.at.events_before is not None:
        links.append(
            html(
                '<a href="{h}" data-pager="events-newest">Newest events</a>',
                h=page_url(d.rollout_id, d.at, "events-heading", calls_from=None, events_before=0),
            )
        )
    links.append(
        html(
            '<a href="/v1/events?rollout_id={id}">All events as JSON</a>',
            id=quote(d.rollout_id, safe=""),
        )
    )
    return html('<nav class="pager" aria-label="Pages of events">{links}</nav>', links=join(links))


def _events_table(rows: Html) -> Html:
    return html(
        '<div class="table-wrap"><table id="events"><thead><tr><th scope="col" class="num">Seq</th>'
        '<th scope="col">Recorded</th><th scope="col">Kind</th><th scope="col" class="num">Gen</th>'
        '<th scope="col">Hash</th></tr></thead><tbody>{rows}</tbody></table></div>',
        rows=rows,
    )


def _call_link(d: RolloutDetail, key: str | None, call_at: Mapping[str, int]) -> Html:
    """Where a finding's call is: on this page, on another page of calls, or not captured."""
    if key is None:
        return Html("")
    on_page = {c.model_call_id: c.call_index for c in d.calls if c.model_call_id}
    on_page.update({c.response_id: c.call_index for c in d.calls if c.response_id})
    if key in on_page:
        href = f"#call-{on_page[key]}"
        index = on_page[key]
    elif key in call_at:
        index = call_at[key]
        href = page_url(d.rollout_id, d.at, f"call-{index}", calls_from=index, events_before=None)
    else:
        return html(' <span class="muted">(call {k}: not among the captured calls)</span>', k=key)
    return html(' <a class="to-call" href="{h}">→ call #{i}</a>', h=href, i=index)


def _health(
    judgement: Judgement | None, d: RolloutDetail, call_at: Mapping[str, int]
) -> tuple[Html, dict[str, list[Html]]]:
    """The health section (verdict, every finding with a link to its call when it is about
    one, the unobserved checks explained), and the findings about a call by its model_call_id
    / response_id (also shown under that call's row)."""
    if judgement is None:
        note = (
            "The health rules are not installed in this ledger."
            if health_rules() is None
            else ("No enriched record to check.")
        )
        return html('<h2 id="health">Health</h2><p class="muted">{n}</p>', n=note), {}
    known = {c.model_call_id for c in d.calls} | {c.response_id for c in d.calls}
    by_call: dict[str, list[Html]] = {}
    listed: list[Html] = []
    for finding in judgement.findings:
        key = _call_key(finding)
        if key is not None and key in known:
            by_call.setdefault(key, []).append(_health_finding(finding))
        if len(listed) < FINDINGS_SHOWN:
            listed.append(_health_finding(finding, _call_link(d, key, call_at)))
    if len(judgement.findings) > FINDINGS_SHOWN:
        hidden = len(judgement.findings) - FINDINGS_SHOWN
        listed.append(html('<p class="muted">{n} more findings are not shown.</p>', n=hidden))
    cls = {"healthy": "ok", "unhealthy": "failed"}.get(judgement.verdict, "pending")
    unobserved = (
        html(
            '<p>Not observed ({n}): {u} <a href="#unobserved-note">what this means</a></p>{note}',
            n=len(judgement.unobserved),
            u=", ".join(judgement.unobserved),
            note=unobserved_note(),
        )
        if judgement.unobserved
        else Html("")
    )
    body = html(
        '<h2 id="health">Health</h2><p>Verdict <span class="tag {cls}" id="verdict"'
        ' data-verdict="{raw}">{v}</span> '
        '<span class="muted">({n} findings of this rollout\'s own checks; the run-level checks'
        " are in <code>/v1/health</code>)</span></p>"
        '<div id="health-findings">{listed}</div>{unobserved}',
        cls=cls,
        raw=judgement.verdict,
        v=verdict_words(judgement.verdict, len(judgement.unobserved)),
        n=len(judgement.findings),
        listed=join(listed),
        unobserved=unobserved,
    )
    return body, by_call


def finding_call_keys(judgement: Judgement | None, d: RolloutDetail) -> list[str]:
    """The calls the findings name that are not on this page (looked up to link to them)."""
    if judgement is None:
        return []
    known = {c.model_call_id for c in d.calls} | {c.response_id for c in d.calls}
    keys = [_call_key(f) for f in judgement.findings[:FINDINGS_SHOWN]]
    return [k for k in keys if k is not None and k not in known]


def rollout_body(
    d: RolloutDetail,
    judgement: Judgement | None = None,
    call_at: Mapping[str, int] | None = None,
    attempts: Html | None = None,
    evidence: EvidencePage | None = None,
) -> Html:
    owners = call_owners(d.calls, d.invocations)
    health, by_call = _health(judgement, d, call_at or {})
    findings: dict[str | None, list[Html]] = {}
    for gap in d.gaps:
        findings.setdefault(gap.invocation_id, []).append(_finding(gap))
    known = {inv.invocation_id for inv in d.invocations}
    loose = [f for key, items in findings.items() if key not in known for f in items]
    facts = [
        ("State", d.state),
        ("Generation", str(d.generation)),
        ("Task", d.task_id or "–"),
        ("Resolved", "–" if d.resolved is None else ("yes" if d.resolved else "no")),
        (
            "Calls",
            f"{d.call_count:,} ({d.failed_count:,} failed, {d.truncated_count:,} truncated,"
            f" {d.pending_count:,} pending)",
        ),
        ("Tools", f"{d.tool_count:,}"),
        ("Gaps", str(len(d.gaps))),
        ("Token coverage", "–" if d.coverage is None else f"{100 * d.coverage:.1f}%"),
        (
            "Capture",
            ("incomplete" if d.incomplete else "complete")
            + (f", {d.damaged_count} damaged lines" if d.damaged_count else ""),
        ),
        ("Events", f"#{d.first_seq} … #{d.last_seq}"),
    ]
    card = html(
        '<div class="summary"><section class="card"'
        ' aria-label="Rollout"><h3>Rollout</h3><dl>{items}</dl>'
        "</section></div>",
        items=join(html("<dt>{k}</dt><dd>{v}</dd>", k=k, v=v) for k, v in facts),
    )
    return html(
        '<p><a href="/ui/">← Rollouts</a></p><h1>Rollout {id}</h1>{copy}{tabs}{card}{attempts}'
        "{health}"
        '<h2 id="timeline">Timeline</h2><a class="skip-past" href="#calls-heading">Skip the'
        " timeline (one link per bar) to the model calls</a>"
        '<div class="legend" aria-hidden="true"><span><i'
        ' class="l-call"></i>model call</span>'
        '<span><i class="l-tool"></i>tool call</span><span><i class="l-failed"></i>failed'
        " (hatched)</span>"
        '<span><i class="l-trunc"></i>truncated (dashed outline)</span><span class="pending">'
        "{pending} pending (no times yet)</span></div>"
        "{scope}{svg}"
        '<h2 id="calls-heading" tabindex="-1">Model calls</h2>{calls}'
        '<h2 id="tools-heading">Tool calls</h2>{tools_note}{tools}'
        '<h2 id="tree-heading">Invocations and gaps</h2>{tree}{loose}'
        "{evidence}"
        '<h2 id="manifest-heading">Manifest and fence</h2>{manifest}'
        '<h2 id="events-heading">Events</h2>{events}',
        id=d.rollout_id,
        copy=copy_field(d.rollout_id, "rollout id"),
        attempts=attempts or "",
        tabs=tabs(d.rollout_id, "details", d.at.calls_from),
        card=card,
        health=health,
        pending=d.pending_count,
        scope=(
            html(
                '<p class="muted" id="timeline-scope">This page\'s calls (#{a} to #{b} of {n}) and'
                " the tool calls that overlap them; the other pages draw the rest.</p>",
                a=d.calls[0].call_index if d.calls else "–",
                b=d.calls[-1].call_index if d.calls else "–",
                n=number(d.call_count),
            )
            if d.paged
            else ""
        ),
        svg=timeline_svg(d.calls, d.tools, d.invocations, owners),
        calls=_calls_table(d, owners, by_call),
        tools_note=_tools_note(d),
        tools=_tools_table(d.tools),
        tree=_tree(d, findings),
        loose=(
            html('<h3>Gaps of the rollout</h3><div id="rollout-gaps">{f}</div>', f=join(loose))
            if loose
            else Html("")
        ),
        evidence=evidence_section(evidence),
        manifest=_manifest(d),
        events=_events(d),
    )
