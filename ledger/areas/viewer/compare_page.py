"""``/ui/compare``: two rollouts side by side (``?a=<id>&b=<id>``), or every rollout of one task
(``?task=<task id>``), and the links to it from a rollout's page.

A pair: both summaries with the facts that differ marked in words, the first point where the
transcripts differ (``divergence``) with both turns there side by side, and both rollouts'
calls aligned by call index, a window of ``COMPARE_CALLS`` from ``calls_from``. A task: one
row per rollout (summary, verdict, where it first differs from the first rollout) with a link
to compare it with the first. Texts are escaped as on every page (``markup``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledger.areas.viewer.compare_query import (
    ATTEMPTS_SHOWN,
    COMPARE_CALLS,
    COMPARE_SCAN,
    TASK_SCAN_CALLS,
    TASK_SHOWN,
    InvalidCompareQuery,
    RolloutSummary,
    Scan,
    TaskView,
)
from ledger.areas.viewer.copy_field import copy_field
from ledger.areas.viewer.divergence import turn_messages
from ledger.areas.viewer.markup import Html, html, join, number, query
from ledger.areas.viewer.overview_page import rollout_url
from ledger.areas.viewer.rollout_page import MAX_CALL_INDEX
from ledger.areas.viewer.rollout_query import CALLS_PER_PAGE, Call
from ledger.areas.viewer.transcript import Message
from ledger.areas.viewer.transcript_page import Turn, message_html, transcript_url
from ledger.gym.ids import TASK_ID_PATTERN, is_valid_rollout_id

MAX_TASK_LENGTH = 500
_PARAMETERS = ("a", "b", "task", "calls_from")


def compare_url(a: str, b: str, calls_from: int | None = None) -> str:
    return "/ui/compare" + query(a=a, b=b, calls_from=calls_from or None)


def task_compare_url(task_id: str) -> str:
    return "/ui/compare" + query(task=task_id)


@dataclass(frozen=True)
class CompareQuery:
    """The checked parameters: a pair (``a``, ``b``), a task, or neither (the form)."""

    a: str | None
    b: str | None
    task: str | None
    calls_from: int


def parse_compare(params: Mapping[str, str], repeated: Mapping[str, int]) -> CompareQuery:
    """``params`` (the first value of each) and how often each name was given: anything
    given twice, malformed or contradictory is an ``InvalidCompareQuery`` naming it."""
    for name in _PARAMETERS:
        if repeated.get(name, 0) > 1:
            what = (
                "give it once"
                if name == "calls_from"
                else "too many ids: compare takes one a and one b (two rollouts), or one task"
                " (all its rollouts)"
            )
            raise InvalidCompareQuery(f"{name}: given {repeated[name]} times; {what}")
    a, b, task = (params.get(n) or None for n in ("a", "b", "task"))
    text = params.get("calls_from") or "0"
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_CALL_INDEX:
        raise InvalidCompareQuery("calls_from: expected a call index (a non-negative integer)")
    for name, value in (("a", a), ("b", b)):
        if value is not None and not is_valid_rollout_id(value):
            raise InvalidCompareQuery(f"{name}: not a rollout id: {value[:200]!r}")
    if task is not None:
        if (a, b) != (None, None):
            raise InvalidCompareQuery("task: give either a and b, or a task, not both")
        if len(task) > MAX_TASK_LENGTH or re.fullmatch(TASK_ID_PATTERN, task) is None:
            raise InvalidCompareQuery(
                f"task: expected a task id (at most {MAX_TASK_LENGTH} characters, no control"
                " characters)"
            )
    elif (a is None) != (b is None):
        missing = "b" if b is None else "a"
        raise InvalidCompareQuery(f"{missing}: missing; compare takes two rollouts, a and b")
    elif a is not None and a == b:
        raise InvalidCompareQuery("b: the same rollout as a; compare takes two rollouts")
    return CompareQuery(a, b, task, int(text))


# --- the form --------------------------------------------------------------------------------


def compare_form(a: str = "", b: str = "", task: str = "") -> Html:
    return html(
        '<form class="filters" method="get" action="/ui/compare" id="compare-form">'
        '<label>Rollout A<input name="a" value="{a}" size="24"></label>'
        '<label>Rollout B<input name="b" value="{b}" size="24"></label>'
        '<button type="submit">Compare two</button></form>'
        '<form class="filters" method="get" action="/ui/compare">'
        '<label>Task<input name="task" value="{task}" size="40"></label>'
        '<button type="submit">Compare its rollouts</button></form>',
        a=a,
        b=b,
        task=task,
    )


def empty_body() -> Html:
    return html(
        "<h1>Compare rollouts</h1><p>Two rollouts side by side, or every rollout of one task."
        " Rollout pages link here too (their task's other rollouts).</p>{form}",
        form=compare_form(),
    )


# --- a pair ----------------------------------------------------------------------------------


def _yes_no(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "no")


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f} s"


def _facts(s: RolloutSummary, verdict: str | None) -> list[tuple[str, str]]:
    return [
        ("Task", s.task_id or "–"),
        ("Attempt", str(s.attempt)),
        ("State", s.state),
        ("Resolved", _yes_no(s.resolved)),
        ("Verdict", verdict or "–"),
        ("Calls", number(s.calls)),
        ("Failed calls", number(s.failed)),
        ("Truncated calls", number(s.truncated)),
        ("Tokens in", number(s.tokens_in)),
        ("Tokens out", number(s.tokens_out)),
        ("Cached tokens", number(s.tokens_cached)),
        ("Reasoning tokens", number(s.tokens_reasoning)),
        ("Wall clock", _seconds(s.duration_s)),
        ("Sum of call latencies", _seconds(None if s.latency_ms is None else s.latency_ms / 1000)),
    ]


def _side_head(label: str, s: RolloutSummary) -> Html:
    return html(
        '<th scope="col" data-side="{label}">{label}: <a href="{h}">{id}</a>'
        ' <a class="muted" href="{t}">transcript</a><br>{copy}</th>',
        label=label,
        h=rollout_url(s.rollout_id),
        id=s.rollout_id,
        t=transcript_url(s.rollout_id),
        copy=copy_field(s.rollout_id, f"rollout id {label}"),
    )


def _summary_table(a: RolloutSummary, b: RolloutSummary, verdicts: Mapping[str, str]) -> Html:
    rows = []
    for (name, left), (_, right) in zip(
        _facts(a, verdicts.get(a.rollout_id)), _facts(b, verdicts.get(b.rollout_id)), strict=True
    ):
        differs = left != right
        rows.append(
            html(
                '<tr data-fact="{name}"{cls}><th scope="row">{name}</th><td>{l}</td><td>{r}</td>'
                "<td>{d}</td></tr>",
                name=name,
                cls=Html(' class="differs"') if differs else "",
                l=left,
                r=right,
                d=Html('<span class="tag differs">differs</span>') if differs else "",
            )
        )
    return html(
        '<div class="table-wrap"><table id="compare-summary"><thead><tr><th scope="col">Fact'
        '</th>{ha}{hb}<th scope="col">A vs B</th></tr></thead><tbody>{rows}</tbody></table>'
        "</div>",
        ha=_side_head("A", a),
        hb=_side_head("B", b),
        rows=join(rows),
    )


def _difference_text(found: Scan, further: str) -> Html:
    if found.difference is not None:
        agreed = (
            html(" They agree on calls #{f} to #{t}.", f=found.calls_from, t=found.agreed_to)
            if found.agreed_to is not None
            else ""
        )
        return html(
            '<p id="difference-where">The transcripts first differ at <strong>{w}</strong>.'
            "{agreed}</p>",
            w=found.difference.describe(),
            agreed=agreed,
        )
    if found.ended:
        span = (
            f"from call #{found.calls_from} to their end (#{found.agreed_to})"
            if found.agreed_to is not None
            else f"from call #{found.calls_from}: neither has a call there"
        )
        return html(
            '<p id="difference-where">No difference: the transcripts are the same {s}.</p>', s=span
        )
    return html(
        '<p id="difference-where">No difference in calls #{f} to #{t} (one page compares {k}'
        ' calls). <a href="{more}" data-pager="compare-further">Look further, from call'
        " #{n}</a>.</p>",
        k=COMPARE_SCAN,
        f=found.calls_from,
        t=found.agreed_to,
        more=further,
        n=found.next_from,
    )


def _message(message: Message, payload: str, first: bool) -> Html:
    if message.role in ("failure", "redacted"):
        text = (
            "The payload was redacted by compaction."
            if message.role == "redacted"
            else f"The call failed: {message.parts[0].text or 'no status'}."
        )
        body = html(
            '<div class="msg role-error" data-role="{r}"><div class="role">{r}</div>'
            '<div class="text">{t}</div></div>',
            r=message.role,
            t=text,
        )
    else:
        body = message_html(message, payload)
    if not first:
        return body
    return html(
        '<div class="first-difference" data-first-difference><p class="diff-label">'
        "First difference</p>{b}</div>",
        b=body,
    )


def _turn_column(label: str, s: RolloutSummary, turn: Turn | None, at: int | None) -> Html:
    if turn is None:
        return html(
            '<section class="compare-side" data-side="{l}"><h3>{l}: no call here</h3>'
            '<p class="muted">Rollout {id} has no call at this index.</p></section>',
            l=label,
            id=s.rollout_id,
        )
    i = turn.item.call.call_index
    payload = f"{rollout_url(s.rollout_id)}/calls/{i}/payload"
    messages = turn_messages(turn)
    return html(
        '<section class="compare-side" data-side="{l}" aria-label="Call {i} of {l}"><h3>{l}:'
        ' <a href="{t}">call #{i}</a> <span class="muted">{model}</span></h3>{msgs}</section>',
        l=label,
        t=transcript_url(s.rollout_id, i - i % CALLS_PER_PAGE or None) + f"#turn-{i}",
        i=i,
        model=turn.item.call.model or "",
        msgs=join(_message(m, payload, n == at) for n, m in enumerate(messages)),
    )


def _difference(a: RolloutSummary, b: RolloutSummary, found: Scan) -> Html:
    text = _difference_text(found, compare_url(a.rollout_id, b.rollout_id, found.next_from))
    sides = Html("")
    if found.difference is not None:
        at = found.difference.message
        sides = html(
            '<div class="compare-turns">{a}{b}</div>',
            a=_turn_column("A", a, found.turn_a, at),
            b=_turn_column("B", b, found.turn_b, at),
        )
    return html(
        '<h2 id="difference">First difference</h2>{text}<p class="muted">Compared: each call\'s'
        " new messages, reply and failure, by role and text; reasoning, ids, tokens and times are"
        " left out.</p>{sides}",
        text=text,
        sides=sides,
    )


def _call_cells(call: Call | None) -> Html:
    if call is None:
        return Html('<td colspan="4" class="muted">no call</td>')
    if call.damaged:
        status = Html('<span class="tag failed">✕ damaged</span>')
    elif call.failed:
        status = html(
            '<span class="tag failed">✕ failed {c}</span>',
            c=call.status_code or call.error_category,
        )
    elif call.truncated:
        status = html('<span class="tag truncated">◩ truncated</span> {c}', c=call.status_code)
    else:
        status = html('<span class="ok">{c}</span>', c=call.status_code or "–")
    return html(
        '<td>{status}</td><td>{model}</td><td class="num">{tin} / {tout}</td>'
        '<td class="num">{lat}</td>',
        status=status,
        model=call.model or call.model_ref_name or "–",
        tin=number(call.tokens_in),
        tout=number(call.tokens_out),
        lat=number(call.latency_ms),
    )


def _calls_table(
    a: RolloutSummary,
    b: RolloutSummary,
    calls_a: Sequence[Call],
    calls_b: Sequence[Call],
    found: Scan,
    calls_from: int,
) -> Html:
    left = {c.call_index: c for c in calls_a}
    right = {c.call_index: c for c in calls_b}
    at = found.difference.call_index if found.difference is not None else None
    rows = []
    for i in sorted(left.keys() | right.keys())[:COMPARE_CALLS]:
        if at is not None and i == at:
            same = Html('<span class="tag differs">first difference</span>')
        elif (found.agreed_to is not None and i <= found.agreed_to) and i >= found.calls_from:
            same = Html("same")
        else:
            same = Html('<span class="muted">–</span>')
        rows.append(
            html(
                '<tr data-call="{i}"><td class="num"><a href="{ha}#call-{i}">#{i}</a></td>'
                "{ca}{cb}<td>{same}</td></tr>",
                i=i,
                ha=rollout_url(a.rollout_id) + query(calls_from=i - i % CALLS_PER_PAGE or None),
                ca=_call_cells(left.get(i)),
                cb=_call_cells(right.get(i)),
                same=same,
            )
        )
    if not rows:
        rows.append(Html('<tr><td colspan="10" class="muted">No call in this window.</td></tr>'))
    pager = []
    if calls_from > 0:
        pager.append(
            html(
                '<a href="{h}" data-pager="compare-previous">Previous {n} calls</a>',
                h=compare_url(a.rollout_id, b.rollout_id, max(0, calls_from - COMPARE_CALLS)),
                n=COMPARE_CALLS,
            )
        )
    if max(a.calls, b.calls) > calls_from + COMPARE_CALLS:
        pager.append(
            html(
                '<a href="{h}" data-pager="compare-next">Next calls</a>',
                h=compare_url(a.rollout_id, b.rollout_id, calls_from + COMPARE_CALLS),
            )
        )
    nav = (
        html('<nav class="pager" aria-label="Windows of calls">{l}</nav>', l=join(pager))
        if pager
        else Html("")
    )
    return html(
        '<h2 id="calls-heading">Calls side by side</h2><p class="muted">Calls #{f} on, by call'
        " index ({n} at most per page); tokens are in / out, latency in ms.</p>{nav}"
        '<div class="table-wrap"><table id="compare-calls"><thead><tr>'
        '<th scope="col" class="num" rowspan="2">#</th><th scope="colgroup" colspan="4">A</th>'
        '<th scope="colgroup" colspan="4">B</th><th scope="col" rowspan="2">Transcript</th></tr>'
        '<tr><th scope="col">Status</th><th scope="col">Model</th><th scope="col" class="num">'
        'Tokens</th><th scope="col" class="num">Latency</th><th scope="col">Status</th>'
        '<th scope="col">Model</th><th scope="col" class="num">Tokens</th><th scope="col"'
        ' class="num">Latency</th></tr></thead><tbody>{rows}</tbody></table></div>{nav}',
        f=calls_from,
        n=COMPARE_CALLS,
        nav=nav,
        rows=join(rows),
    )


def pair_body(
    a: RolloutSummary,
    b: RolloutSummary,
    verdicts: Mapping[str, str],
    found: Scan,
    calls_a: Sequence[Call],
    calls_b: Sequence[Call],
    calls_from: int,
) -> Html:
    task = (
        html(
            ' <a href="{h}">All rollouts of task {t}</a>',
            h=task_compare_url(a.task_id),
            t=a.task_id,
        )
        if a.task_id is not None
        else ""
    )
    return html(
        '<p><a href="/ui/">← Rollouts</a>{task}</p><h1>Compare {a} and {b}</h1>{summary}'
        "{difference}{calls}<h2>Compare others</h2>{form}",
        task=task,
        a=a.rollout_id,
        b=b.rollout_id,
        summary=_summary_table(a, b, verdicts),
        difference=_difference(a, b, found),
        calls=_calls_table(a, b, calls_a, calls_b, found, calls_from),
        form=compare_form(a.rollout_id, b.rollout_id),
    )


# --- a task ----------------------------------------------------------------------------------


def _task_difference(found: Scan | None) -> str:
    if found is None:
        return "(the reference)"
    if found.difference is not None:
        return found.difference.describe()
    if found.ended:
        return "none: the same transcript"
    return f"none in the first {TASK_SCAN_CALLS} calls"


def task_body(view: TaskView, verdicts: Mapping[str, str]) -> Html:
    first = view.rollouts[0].summary
    rows = []
    for n, item in enumerate(view.rollouts):
        s = item.summary
        compare = (
            html(
                '<a href="{h}">Compare with {f}</a>',
                h=compare_url(first.rollout_id, s.rollout_id),
                f=first.rollout_id,
            )
            if n
            else Html('<span class="muted">–</span>')
        )
        rows.append(
            html(
                '<tr data-rollout="{id}"><th scope="row" class="id"><a href="{h}">{id}</a></th>'
                '<td class="num">{att}</td><td>{state}</td><td>{res}</td><td>{verdict}</td>'
                '<td class="num">{calls}</td><td class="num">{failed}</td>'
                '<td class="num">{tin}</td><td class="num">{tout}</td><td class="num">{dur}</td>'
                '<td data-col="difference">{diff}</td><td>{compare}</td></tr>',
                id=s.rollout_id,
                h=rollout_url(s.rollout_id),
                att=s.attempt,
                state=s.state,
                res=_yes_no(s.resolved),
                verdict=verdicts.get(s.rollout_id, "–"),
                calls=number(s.calls),
                failed=number(s.failed),
                tin=number(s.tokens_in),
                tout=number(s.tokens_out),
                dur=_seconds(s.duration_s),
                diff=_task_difference(item.scan),
                compare=compare,
            )
        )
    resolved = sum(1 for r in view.rollouts if r.summary.resolved)
    more = (
        html(
            '<p class="muted">The first {n} rollouts of the task are shown; <a href="{h}">all of'
            " them in the overview</a>.</p>",
            n=TASK_SHOWN,
            h="/ui/" + query(task=view.task_id, sort="natural"),
        )
        if view.more
        else ""
    )
    return html(
        '<p><a href="/ui/">← Rollouts</a></p><h1>Rollouts of task {t}</h1>{copy}'
        '<p id="task-counts">{n} rollouts shown (every attempt), {r} resolved. Each is compared'
        " with the first, {f}, over its first {k} calls.</p>{more}"
        '<div class="table-wrap"><table id="task-rollouts"><thead><tr>'
        '<th scope="col">Rollout</th><th scope="col" class="num">Attempt</th>'
        '<th scope="col">State</th><th scope="col">Resolved</th><th scope="col">Verdict</th>'
        '<th scope="col" class="num">Calls</th><th scope="col" class="num">Failed</th>'
        '<th scope="col" class="num">Tokens in</th><th scope="col" class="num">Tokens out</th>'
        '<th scope="col" class="num">Wall clock</th><th scope="col">First difference from'
        ' {f}</th><th scope="col">Side by side</th></tr></thead><tbody>{rows}</tbody></table>'
        "</div><h2>Compare others</h2>{form}",
        t=view.task_id,
        copy=copy_field(view.task_id, "task id"),
        n=len(view.rollouts),
        r=resolved,
        f=first.rollout_id,
        k=TASK_SCAN_CALLS,
        more=more,
        rows=join(rows),
        form=compare_form(task=view.task_id),
    )


# --- from a rollout's page -------------------------------------------------------------------


def attempts_html(rollout_id: str, task_id: str | None, others: Sequence[str]) -> Html:
    """The rollout's page's links to the other rollouts of its task."""
    if not others or task_id is None:
        return Html("")
    shown = others[:ATTEMPTS_SHOWN]
    links = join(
        html(
            '<li><a href="{h}">{id}</a> · <a href="{c}" aria-label="Compare with {id}">compare'
            "</a></li>",
            h=rollout_url(other),
            id=other,
            c=compare_url(rollout_id, other),
        )
        for other in shown
    )
    whole = html(
        ' <a href="{h}" id="task-compare">All rollouts of the task side by side</a>',
        h=task_compare_url(task_id),
    )
    more = (
        Html(f'<li class="muted">more than {ATTEMPTS_SHOWN}: see the task</li>')
        if len(others) > ATTEMPTS_SHOWN
        else ""
    )
    return html(
        '<section id="attempts" aria-labelledby="attempts-h"><h2 id="attempts-h">Other rollouts'
        " of this task</h2>"
        '<p class="muted">Compare this rollout with another.{whole}</p><ul class="attempts">'
        "{links}{more}</ul></section>",
        whole=whole,
        links=links,
        more=more,
    )
