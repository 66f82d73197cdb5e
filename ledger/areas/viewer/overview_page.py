"""``/ui/``: the run overview (filters, sortable columns, keyset paging, selection summary)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from ledger.areas.viewer.health_triage import RunHealth
from ledger.areas.viewer.health_words import (
    CHECKS,
    ROLLOUT_CHECKS,
    check_link,
    failing_checks,
    unobserved_note,
    verdict_words,
)
from ledger.areas.viewer.markup import Html, html, join, number, query
from ledger.areas.viewer.overview_query import (
    PAGE_SIZES,
    SORTS,
    InvalidOverviewQuery,
    OverviewFilter,
    OverviewPage,
    OverviewQuery,
    OverviewRow,
    OverviewSummary,
    TaskRow,
    decode_cursor,
)
from ledger.areas.viewer.verdicts import Judgement

MAX_GLOB = 200
PAGE_COUNT_LABELS = {
    "healthy": "Healthy",
    "unhealthy": "Unhealthy",
    "unobserved": "No findings, some unobserved",
}

COLUMNS: tuple[tuple[str, str | None, bool], ...] = (
    # (heading, sort key or None, numeric)
    ("Rollout", "natural", False),
    ("Task", None, False),
    ("Attempt", None, True),
    ("State", None, False),
    ("Gen", "generation", True),
    ("Verdict", None, False),
    ("Resolved", None, False),
    ("Calls", "calls", True),
    ("Tokens in", "tokens_in", True),
    ("Out", "tokens_out", True),
    ("Cached", "tokens_cached", True),
    ("Reasoning", "tokens_reasoning", True),
    ("Σ call latency ms", "latency", True),
    ("Wall clock s", "duration", True),
    ("Gaps", "gaps", True),
    ("Last event", "last_event", True),
)


def rollout_url(rollout_id: str) -> str:
    return "/ui/rollouts/" + quote(rollout_id, safe="")


def parse_query(params: Mapping[str, str]) -> OverviewQuery:
    """The page's query string, checked: a bad value is a 400 naming the parameter."""
    glob = params.get("id") or None
    if glob is not None and len(glob) > MAX_GLOB:
        raise InvalidOverviewQuery(f"id: glob longer than {MAX_GLOB} characters")
    state = params.get("state") or None
    if state not in (None, "live", "retired"):
        raise InvalidOverviewQuery("state: expected live or retired")
    gap_text = params.get("gaps") or None
    if gap_text not in (None, "yes", "no"):
        raise InvalidOverviewQuery("gaps: expected yes or no")
    task = params.get("task") or None
    task_has = params.get("task_has") or None
    for name, value in (("task", task), ("task_has", task_has)):
        if value is not None and (len(value) > MAX_GLOB or not value.isprintable()):
            raise InvalidOverviewQuery(
                f"{name}: expected printable text of at most {MAX_GLOB} characters"
            )
    resolved = params.get("resolved") or None
    if resolved not in (None, "yes", "no", "unknown"):
        raise InvalidOverviewQuery("resolved: expected yes, no or unknown")
    evidence = params.get("evidence") or None
    if evidence not in (None, "missing", "pending"):
        raise InvalidOverviewQuery("evidence: expected missing or pending")
    verdict = params.get("verdict") or None
    if verdict is not None and len(verdict) > 40:
        raise InvalidOverviewQuery("verdict: too long")
    check = params.get("check") or None
    if check is not None and check not in ROLLOUT_CHECKS:
        raise InvalidOverviewQuery(
            f"check: expected one of {', '.join(ROLLOUT_CHECKS)}; got {check[:60]!r}"
        )
    sort = params.get("sort") or "id"
    if sort not in SORTS:
        raise InvalidOverviewQuery(f"sort: expected one of {', '.join(SORTS)}")
    direction = params.get("dir") or "asc"
    if direction not in ("asc", "desc"):
        raise InvalidOverviewQuery("dir: expected asc or desc")
    limit_text = params.get("limit") or "50"
    if not (limit_text.isascii() and limit_text.isdigit()) or int(limit_text) not in PAGE_SIZES:
        raise InvalidOverviewQuery(f"limit: expected one of {', '.join(map(str, PAGE_SIZES))}")
    after = params.get("after") or None
    return OverviewQuery(
        filter=OverviewFilter(
            id_glob=glob,
            state=state,  # type: ignore[arg-type]
            has_gap=None if gap_text is None else gap_text == "yes",
            verdict=verdict,
            task=task,
            task_has=task_has,
            resolved=resolved,
            check=check,
            evidence=evidence,
        ),
        sort=sort,
        direction=direction,  # type: ignore[arg-type]
        limit=int(limit_text),
        after=None if after is None else decode_cursor(after, sort),
    )


def _filter_params(q: OverviewQuery) -> dict[str, object]:
    f = q.filter
    return {
        "id": f.id_glob,
        "state": f.state,
        "gaps": None if f.has_gap is None else ("yes" if f.has_gap else "no"),
        "verdict": f.verdict,
        "task": f.task,
        "task_has": f.task_has,
        "resolved": f.resolved,
        "check": f.check,
        "evidence": f.evidence,
    }


def _link(q: OverviewQuery, **changes: object) -> str:
    params: dict[str, object] = {**_filter_params(q), "sort": q.sort, "dir": q.direction}
    if q.limit != 50:
        params["limit"] = q.limit
    params.update(changes)
    if params.get("sort") == "id" and params.get("dir") == "asc":
        params.pop("sort")
        params.pop("dir")
    return "/ui/" + query(**params)


def _option(value: str, label: str, current: str | None) -> Html:
    selected = Html(" selected") if value == (current or "") else Html("")
    return html('<option value="{v}"{s}>{label}</option>', v=value, s=selected, label=label)


def _filters(q: OverviewQuery, verdicts: list[str]) -> Html:
    f = q.filter
    gaps = None if f.has_gap is None else ("yes" if f.has_gap else "no")
    verdict_options = [_option("", "any", f.verdict)] + [
        _option(v, "no findings, some unobserved" if v == "unobserved" else v, f.verdict)
        for v in verdicts
    ]
    return html(
        '<form class="filters" method="get" action="/ui/" role="search" aria-label="Filter'
        ' rollouts">'
        '<label>Rollout id (glob)<input name="id" value="{glob}" placeholder="task7-*"'
        ' maxlength="{max}"></label>'
        '<label>Task (exactly)<input name="task" value="{task}" maxlength="{max}"></label>'
        '<label>Task contains<input name="task_has" value="{task_has}" maxlength="{max}">'
        "</label>"
        '<label>Resolved<select name="resolved">{resolved}</select></label>'
        '<label>State<select name="state">{states}</select></label>'
        '<label>Verdict<select name="verdict"{vdis}>{verdicts}</select></label>'
        '<label>Failing check<select name="check"{vdis}>{checks}</select></label>'
        '<label>Gaps<select name="gaps">{gaps}</select></label>'
        '<label>Call evidence<select name="evidence">{evidence}</select></label>'
        '<label>Per page<select name="limit">{limits}</select></label>'
        '<input type="hidden" name="sort" value="{sort}"><input type="hidden" name="dir"'
        ' value="{dir}">'
        '<button type="submit">Apply</button> <a href="/ui/">Clear</a></form>',
        glob=f.id_glob or "",
        max=MAX_GLOB,
        task=f.task or "",
        task_has=f.task_has or "",
        resolved=join(
            _option(v, label, f.resolved)
            for v, label in (("", "any"), ("yes", "yes"), ("no", "no"), ("unknown", "not reported"))
        ),
        states=join(
            [
                _option("", "any", f.state),
                _option("live", "live", f.state),
                _option("retired", "retired", f.state),
            ]
        ),
        verdicts=join(verdict_options),
        checks=join(
            [_option("", "any", f.check)] + [_option(c, c, f.check) for c in ROLLOUT_CHECKS]
        ),
        vdis=Html("") if verdicts else Html(" disabled"),
        gaps=join(
            [
                _option("", "any", gaps),
                _option("yes", "with gaps", gaps),
                _option("no", "without gaps", gaps),
            ]
        ),
        evidence=join(
            _option(v, label, f.evidence)
            for v, label in (("", "any"), ("missing", "missing"), ("pending", "pending"))
        ),
        limits=join(_option(str(n), str(n), str(q.limit)) for n in PAGE_SIZES),
        sort=q.sort,
        dir=q.direction,
    )


def _card(title: str, items: list[tuple[str, str]]) -> Html:
    return html(
        '<section class="card" aria-label="{title}"><h3>{title}</h3><dl>{items}</dl></section>',
        title=title,
        items=join(html("<dt>{k}</dt><dd>{v}</dd>", k=k, v=v) for k, v in items),
    )


def summary_cards(s: OverviewSummary, page_counts: Mapping[str, int]) -> Html:
    judged = s.resolved + s.unresolved
    quality = [
        ("Rollouts (all attempts)", number(s.rollouts)),
        ("Live / retired", f"{number(s.live)} / {number(s.retired)}"),
        ("With gaps", f"{number(s.with_gaps)} ({number(s.gaps)} gaps)"),
        (
            "Resolved (all attempts)",
            f"{number(s.resolved)} of {number(judged)}"
            + (f" ({100 * s.resolved / judged:.1f}%)" if judged else ""),
        ),
        ("Incomplete captures", number(s.incomplete)),
        ("Pending calls", number(s.pending_calls)),
        ("Token coverage", "–" if s.mean_coverage is None else f"{100 * s.mean_coverage:.1f}%"),
    ]
    if s.health is not None:
        h = s.health
        quality += [
            ("Healthy (latest attempts)", number(h.verdicts["healthy"])),
            ("Unhealthy (latest attempts)", number(h.verdicts["unhealthy"])),
            ("No findings, some unobserved (latest)", number(h.verdicts["unobserved"])),
        ]
    quality += [
        (f"{PAGE_COUNT_LABELS[name]} (this page)", number(count))
        for name, count in page_counts.items()
    ]
    perf = [
        ("Model calls", number(s.calls)),
        ("Tokens in", number(s.tokens_in)),
        ("Tokens out", number(s.tokens_out)),
        ("Cached", number(s.tokens_cached)),
        ("Reasoning", number(s.tokens_reasoning)),
        ("Latency total", f"{s.latency_ms / 1000:,.1f} s"),
        ("Latency / call", "–" if not s.calls else f"{s.latency_ms / s.calls:,.0f} ms"),
    ]
    return html(
        '<div class="summary">{a}{b}</div>', a=_card("Quality", quality), b=_card("Perf", perf)
    )


def _heading(q: OverviewQuery, title: str, key: str | None, numeric: bool) -> Html:
    cls = Html(' class="num"') if numeric else Html("")
    if key is None:
        return html('<th scope="col"{cls}>{title}</th>', cls=cls, title=title)
    if q.sort == key:
        direction = "desc" if q.direction == "asc" else "asc"
        aria = "ascending" if q.direction == "asc" else "descending"
        arrow = " ▲" if q.direction == "asc" else " ▼"
    else:
        direction, aria, arrow = ("desc" if numeric else "asc"), "none", ""
    return html(
        '<th scope="col"{cls} aria-sort="{aria}"><a href="{href}">{title}{arrow}</a></th>',
        cls=cls,
        aria=aria,
        href=_link(q, sort=key, dir=direction),
        title=title,
        arrow=arrow,
    )


def _resolved(value: bool | None) -> Html:
    if value is None:
        return Html('<span class="muted">–</span>')
    return (
        Html('<span class="ok">✓ yes</span>') if value else Html('<span class="failed">✕ no</span>')
    )


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def tasks_table(s: OverviewSummary) -> Html:
    """Per task: rollouts (all attempts), then the latest attempt of each rollout."""
    if not s.tasks:
        return Html("")
    rows = join(_task_row(t) for t in s.tasks)
    more = (
        html(
            '<p class="muted">The first {k} of {n} tasks (by task id); filter by task to see'
            " the others.</p>",
            k=len(s.tasks),
            n=number(s.task_count),
        )
        if s.task_count > len(s.tasks)
        else Html("")
    )
    return html(
        '<h2 id="tasks-heading">Tasks</h2><div class="table-wrap"><table id="tasks">'
        '<caption class="muted">Rollouts counts every attempt; latest, resolved, unhealthy'
        " and duration are over the latest attempt of each rollout (a retried rollout counts"
        " once); tokens are in + out over every attempt.</caption><thead><tr>"
        '<th scope="col">Task</th><th scope="col" class="num">Rollouts (all attempts)</th>'
        '<th scope="col" class="num">Latest attempts</th>'
        '<th scope="col" class="num">Resolved (latest)</th>'
        '<th scope="col" class="num">Unhealthy (latest)</th>'
        '<th scope="col" class="num">Tokens</th>'
        '<th scope="col" class="num">p50 wall clock s</th>'
        '<th scope="col" class="num">p95 wall clock s</th></tr></thead><tbody>{rows}</tbody>'
        "</table></div>{more}",
        rows=rows,
        more=more,
    )


def _task_row(t: TaskRow) -> Html:
    rate = f" ({100 * t.resolved / t.judged:.0f}%)" if t.judged else ""
    return html(
        '<tr data-task="{task}"><td class="id"><a href="{href}">{task}</a></td>'
        '<td class="num">{n}</td><td class="num">{latest}</td>'
        '<td class="num">{res} of {judged}{rate}</td><td class="num" data-col="unhealthy">'
        "{unhealthy}</td>"
        '<td class="num">{tokens}</td>'
        '<td class="num">{p50}</td><td class="num">{p95}</td></tr>',
        task=t.task,
        href="/ui/" + query(task=t.task, sort="natural"),
        n=number(t.rollouts),
        latest=number(t.latest),
        res=number(t.resolved),
        judged=number(t.judged),
        rate=rate,
        unhealthy=_unhealthy_cell(t),
        tokens=number(t.tokens),
        p50=_seconds(t.p50_s),
        p95=_seconds(t.p95_s),
    )


def _unhealthy_cell(t: TaskRow) -> Html:
    if t.unhealthy is None:
        return Html("–")
    if not t.unhealthy:
        return Html("0")
    return html(
        '<a href="{h}">{n}</a>',
        h="/ui/" + query(task=t.task, verdict="unhealthy", sort="natural"),
        n=number(t.unhealthy),
    )


def _verdict_cell(judgement: Judgement | None) -> Html:
    """The verdict in words and the checks that failed, each linked to the rollouts it fails
    on; "unobserved" is never shown as a verdict (see the note above the table)."""
    if judgement is None:
        return Html("–")
    words = verdict_words(judgement.verdict, len(judgement.unobserved))
    cls = {"healthy": "ok", "unhealthy": "failed"}.get(judgement.verdict, "muted")
    checks = failing_checks(judgement.findings)
    return html(
        '<span class="{cls}" data-verdict="{v}">{words}</span>{checks}',
        cls=cls,
        v=judgement.verdict,
        words=words,
        checks=html(
            '<ul class="checks">{items}</ul>',
            items=join(html("<li>{a}</li>", a=check_link(c)) for c in checks),
        )
        if checks
        else Html(""),
    )


def _row(r: OverviewRow, judgement: Judgement | None) -> Html:
    state_cls = "retired" if r.state == "retired" else "ok"
    calls = number(r.calls)
    if r.pending:
        calls += f" (+{r.pending} pending)"
    return html(
        '<tr data-rollout="{id}"><td class="id"><a href="{href}">{id}</a></td>'
        '<td class="task" data-col="task" title="{task}">{task}</td>'
        '<td class="num" data-col="attempt">{attempt}</td>'
        '<td><span class="tag {scls}">{state}</span></td><td class="num">{gen}</td>'
        '<td class="verdict" data-col="verdict">{verdict}</td>'
        '<td data-col="resolved">{resolved}</td>'
        '<td class="num">{calls}</td><td class="num">{tin}</td>'
        '<td class="num">{tout}</td><td class="num">{tcache}</td><td class="num">{treason}</td>'
        '<td class="num">{lat}</td><td class="num" data-col="duration">{dur}</td>'
        '<td class="num{gcls}">{gaps}</td>'
        '<td class="num"><time datetime="{iso}">{when}</time> <span'
        ' class="muted">#{seq}</span></td></tr>',
        id=r.rollout_id,
        href=rollout_url(r.rollout_id),
        scls=state_cls,
        state=r.state,
        gen=r.generation,
        verdict=_verdict_cell(judgement),
        calls=calls,
        tin=number(r.tokens_in),
        tout=number(r.tokens_out),
        tcache=number(r.tokens_cached),
        treason=number(r.tokens_reasoning),
        lat=number(r.latency_ms),
        task=r.task_id or "–",
        attempt=r.attempt,
        resolved=_resolved(r.resolved),
        dur=_seconds(r.duration_s),
        gcls=" failed" if r.gaps else "",
        gaps=number(r.gaps),
        iso=r.updated_at.isoformat(),
        when=r.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
        seq=r.last_seq,
    )


def health_section(q: OverviewQuery, h: RunHealth | None) -> Html:
    """The run-level table: each check, the latest attempts it fails on (linked to the
    overview filtered on it, and the first few rollouts), and where it could not run."""
    if h is None:
        return Html("")
    base = {"id": q.filter.id_glob, "task": q.filter.task, "task_has": q.filter.task_has}
    base |= {"state": q.filter.state, "resolved": q.filter.resolved}
    rows = [
        html(
            '<tr data-check="{check}"><th scope="row">{link}<div class="muted what">{what}'
            '</div></th><td class="num" data-col="failing">{failing}</td>'
            '<td class="examples">{examples}</td><td class="num" data-col="unobserved">'
            "{unobserved}</td></tr>",
            check=row.check,
            link=check_link(row.check, **base) if row.failing else row.check,
            what=CHECKS.get(row.check, ""),
            failing=number(row.failing),
            examples=join(
                [
                    *(html('<a href="{h}">{id}</a>', h=rollout_url(r), id=r) for r in row.examples),
                    *([Html("…")] if row.failing > len(row.examples) else []),
                ],
                " ",
            ),
            unobserved=number(row.unobserved),
        )
        for row in h.checks
    ]
    if not rows:
        rows = [Html('<tr><td colspan="4" class="muted">No check found anything.</td></tr>')]
    notes = []
    if h.superseded:
        notes.append(f"earlier attempts left out: {h.superseded:,}")
    if h.without_record:
        notes.append(f"rollouts with no record to check yet: {h.without_record:,}")
    if h.unchecked:
        notes.append(
            f"{h.unchecked:,} records are not counted: the health follower has not checked"
            " them yet (reload in a moment)"
        )
    return html(
        '<h2 id="health-heading">Health</h2><div class="table-wrap"><table id="health-checks">'
        '<caption class="muted">Over the latest attempt of each rollout ({n} checked{notes}),'
        " as <code>/v1/health</code> counts them (its task checks are there). A rollout counts"
        " once per check, however many findings it has.</caption><thead><tr>"
        '<th scope="col">Check</th><th scope="col" class="num">Rollouts failing</th>'
        '<th scope="col">First failing rollouts</th>'
        '<th scope="col" class="num">Unobserved on</th></tr></thead><tbody>{rows}</tbody>'
        "</table></div>{note}",
        n=number(h.counted),
        notes="; " + "; ".join(notes) if notes else "",
        rows=join(rows),
        note=unobserved_note(),
    )


def overview_body(
    q: OverviewQuery,
    page: OverviewPage,
    summary: OverviewSummary,
    *,
    summary_seq: int,
    judged: Mapping[str, Judgement],
    health_installed: bool,
    page_counts: Mapping[str, int],
) -> Html:
    head = join(_heading(q, t, k, n) for t, k, n in COLUMNS)
    body = join(_row(r, judged.get(r.rollout_id)) for r in page.rows)
    if not page.rows:
        body = Html(f'<tr><td colspan="{len(COLUMNS)}" class="muted">No rollout matches.</td></tr>')
    pager = [html('<a href="{h}">First page</a>', h=_link(q))] if q.after is not None else []
    if page.next_after is not None:
        pager.append(
            html('<a href="{h}" rel="next">Next page</a>', h=_link(q, after=page.next_after))
        )
    judged_filter = q.filter.verdict is not None or q.filter.check is not None
    return html(
        "<h1>Rollouts</h1>{filters}{summary}{health}{tasks}"
        '<div class="table-wrap"><table id="rollouts"><caption class="muted">{caption}</caption>'
        "<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
        '<nav class="pager" aria-label="Pages of rollouts">{pager}</nav>',
        filters=_filters(q, list(PAGE_COUNT_LABELS) if health_installed else []),
        summary=summary_cards(summary, page_counts),
        health=health_section(q, summary.health),
        tasks=tasks_table(summary),
        caption=(
            f"{len(page.rows)} shown of {summary.rollouts:,} selected rollouts (every"
            " attempt is a rollout; the verdict and check filters look at up to 2,000 a page)"
            if judged_filter
            else f"{len(page.rows)} shown of {summary.rollouts:,} selected rollouts (every"
            " attempt is a rollout)"
        )
        + f" (summary as of event #{summary_seq})",
        head=head,
        body=body,
        pager=join(pager),
    )
