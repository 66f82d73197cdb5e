"""The viewer's routes under ``/ui``: HTML pages, the payload fragments, the event stream and the
two assets. Every page is read-only and answers HTML (errors too); none is in the OpenAPI schema.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from sqlalchemy import Connection, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.app.http.deps import MAX_SEQ, get_ledger
from ledger.areas.evidence.findings import Window
from ledger.areas.evidence.page_query import EvidencePage, rollout_evidence_page
from ledger.areas.viewer import (
    compare_query,
    events_query,
    overview_query,
    rollout_query,
    signin,
    transcript_query,
    verdicts,
)
from ledger.areas.viewer.assets import CSS, ICON, JS, fingerprint
from ledger.areas.viewer.compare_page import (
    attempts_html,
    empty_body,
    pair_body,
    parse_compare,
    task_body,
)
from ledger.areas.viewer.events_page import (
    SHOWN,
    InvalidTailQuery,
    event_json,
    events_body,
    parse_tail,
)
from ledger.areas.viewer.evidence_section import EVIDENCE_SHOWN
from ledger.areas.viewer.json_view import json_html
from ledger.areas.viewer.layout import SECURITY_HEADERS, fragment, page, problem
from ledger.areas.viewer.markup import Html, html
from ledger.areas.viewer.overview_page import overview_body, parse_query, rollout_url
from ledger.areas.viewer.rollout_page import (
    MAX_CALL_INDEX,
    finding_call_keys,
    parse_page_at,
    rollout_body,
)
from ledger.areas.viewer.summary_cache import SummaryCache
from ledger.areas.viewer.transcript_page import transcript_body
from ledger.areas.viewer.verdicts import Judgement
from ledger.gym.ids import is_valid_rollout_id
from ledger.log.tables import rollouts

router = APIRouter(prefix="/ui", include_in_schema=False)

# How often the stream looks for new events, and how long one stream lives: EventSource
# reconnects by itself (sending Last-Event-ID), and a bounded stream never holds a shutdown.
STREAM_POLL_SECONDS = 0.2
STREAM_LIFETIME_SECONDS = 60.0
STREAM_BATCH = 200
KEEPALIVE_SECONDS = 15.0
# The verdict filter judges at most this many rollouts per request, this many at a time.
VERDICT_SCAN = 2000
VERDICT_BATCH = 200


@router.get("")
async def ui_root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=308)


@router.get("/static/viewer-{version}.css")
async def stylesheet(version: str) -> Response:
    return _asset(CSS, version, "text/css")


@router.get("/static/viewer-{version}.js")
async def script(version: str) -> Response:
    return _asset(JS, version, "text/javascript")


@router.get("/static/icon-{version}.svg")
async def icon(version: str) -> Response:
    return _asset(ICON, version, "image/svg+xml")


def _asset(text: str, version: str, media_type: str) -> Response:
    if version != fingerprint(text):
        return Response("unknown asset version", status_code=404, media_type="text/plain")
    headers = {**SECURITY_HEADERS, "Cache-Control": "public, max-age=31536000, immutable"}
    return Response(text, media_type=media_type, headers=headers)


@router.get("/sign-in")
async def sign_in_page(request: Request) -> HTMLResponse:
    return signin.sign_in_form(signin.safe_next(request.query_params.get("next")))


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    return await signin.sign_in(request)


@router.post("/sign-out")
async def sign_out() -> Response:
    return signin.sign_out()


@router.get("/")
async def overview(request: Request) -> Response:
    if not signin.signed_in(request):
        return signin.to_sign_in(request)
    try:
        query = parse_query(request.query_params)
    except overview_query.InvalidOverviewQuery as exc:
        return problem(400, str(exc))
    judge = verdicts.health_rules()
    wanted = query.filter.verdict
    check = query.filter.check
    if (wanted is not None or check is not None) and judge is None:
        name = "verdict" if wanted is not None else "check"
        return problem(400, f"{name}: the health rules are not installed in this ledger")
    if wanted is not None and wanted not in verdicts.VERDICTS:
        return problem(400, f"verdict: expected one of {', '.join(verdicts.VERDICTS)}")
    ledger = get_ledger(request)
    if query.filter.evidence is not None:
        cutoff = evidence_window(request).cutoff
        query = replace(query, filter=replace(query.filter, evidence_cutoff=cutoff))
    cache = SummaryCache.of(request.app.state)
    judgements = verdicts.JudgementCache.of(request.app.state)
    # The summary is SQL over the selection; the verdict and check filters apply to pages only.
    summary_filter = replace(query.filter, verdict=None, check=None)
    async with ledger.store.read() as conn:
        if judge is not None and (wanted is not None or check is not None):
            keep = partial(_judged_as, verdict=wanted, check=check)
            found, judged = await judged_page(conn, query, judge, keep, judgements)
        else:
            found = await overview_query.read_page(conn, query)
            judged = {}
            if judge is not None:
                keys = [(row.rollout_id, row.last_seq) for row in found.rows]
                judged = await conn.run_sync(
                    partial(verdicts.judge_rollouts, judge=judge, rollouts=keys, cache=judgements)
                )
        # The summary is of the views: kept for the seq they have reached.
        head = await conn.run_sync(ledger.freshness.projected_in)
        cached = cache.get(summary_filter, head)
        if cached is None:
            summary = await overview_query.read_summary(
                conn, summary_filter, with_health=judge is not None
            )
            cached = cache.put(summary_filter, head, summary)
    counts = {v: sum(1 for j in judged.values() if j.verdict == v) for v in verdicts.VERDICTS}
    body = overview_body(
        query,
        found,
        cached.summary,
        summary_seq=cached.head_seq,
        judged=judged,
        health_installed=judge is not None,
        page_counts=counts if judge else {},
    )
    return page("Rollouts", body, current="overview")


def _judged_as(judgement: Judgement, verdict: str | None, check: str | None) -> bool:
    if verdict is not None and judgement.verdict != verdict:
        return False
    return check is None or any(f.get("check") == check for f in judgement.findings)


async def judged_page(
    conn: AsyncConnection,
    query: overview_query.OverviewQuery,
    judge: verdicts.Judge,
    keep: Callable[[Judgement], bool],
    cache: verdicts.JudgementCache,
) -> tuple[overview_query.OverviewPage, dict[str, verdicts.Judgement]]:
    """A page of rollouts whose judgement is kept (a verdict, a failing check). Verdicts are
    computed, not stored per page order, so the rows are read in the page's order and judged
    in batches, up to ``VERDICT_SCAN`` rollouts per request; "Next page" continues after the
    last one looked at, so paging through a large run stays bounded per request."""
    matched: list[overview_query.OverviewRow] = []
    judged: dict[str, verdicts.Judgement] = {}
    after = query.after
    scanned = 0
    while True:
        batch = await overview_query.read_page(
            conn, replace(query, limit=VERDICT_BATCH, after=after)
        )
        keys = [(row.rollout_id, row.last_seq) for row in batch.rows]
        found = await conn.run_sync(
            partial(verdicts.judge_rollouts, judge=judge, rollouts=keys, cache=cache)
        )
        for row in batch.rows:
            scanned += 1
            judgement = found.get(row.rollout_id)
            if judgement is not None and keep(judgement):
                matched.append(row)
                judged[row.rollout_id] = judgement
            if len(matched) == query.limit or scanned >= VERDICT_SCAN:
                cursor = overview_query.encode_cursor(row.sort_key, row.rollout_id)
                more = row is not batch.rows[-1] or batch.next_after is not None
                return overview_query.OverviewPage(matched, cursor if more else None), judged
        if batch.next_after is None:
            return overview_query.OverviewPage(matched, None), judged
        after = overview_query.decode_cursor(batch.next_after, query.sort)


@router.get("/rollouts/{rollout_id}")
async def rollout(request: Request, rollout_id: str) -> Response:
    if not signin.signed_in(request):
        return signin.to_sign_in(request)
    if not is_valid_rollout_id(rollout_id):
        return problem(400, f"Invalid rollout id: {rollout_id[:200]!r}")
    try:
        at = parse_page_at(request.query_params)
    except rollout_query.InvalidRolloutQuery as exc:
        return problem(400, str(exc))
    judge = verdicts.health_rules()
    cache = verdicts.JudgementCache.of(request.app.state)
    window = evidence_window(request)
    await get_ledger(request).freshness.wait_for_rollout(rollout_id)

    def read(
        conn: Connection,
    ) -> tuple[
        rollout_query.RolloutDetail | None,
        Judgement | None,
        dict[str, int],
        list[str],
        EvidencePage | None,
    ]:
        detail = rollout_query.read_rollout(conn, rollout_id, at)
        if detail is None:
            return None, None, {}, [], None
        others = compare_query.read_attempts(conn, rollout_id, detail.task_id)
        evidence = rollout_evidence_page(conn, rollout_id, window, EVIDENCE_SHOWN)
        if judge is None:
            return detail, None, {}, others, evidence
        found = verdicts.judge_rollouts(conn, judge, [(rollout_id, detail.last_seq)], cache)
        judgement = found.get(rollout_id)
        elsewhere = finding_call_keys(judgement, detail)
        call_at = rollout_query.call_indexes(conn, rollout_id, detail.generation, elsewhere)
        return detail, judgement, call_at, others, evidence

    detail, judgement, call_at, others, evidence = await get_ledger(request).store.read_sync(read)
    if detail is None:
        return problem(404, f"No rollout {rollout_id!r} in this ledger.")
    attempts = attempts_html(rollout_id, detail.task_id, others)
    body = rollout_body(detail, judgement, call_at, attempts, evidence)
    return page(f"Rollout {rollout_id}", body)


def evidence_window(request: Request) -> Window:
    """The clock the call evidence is named against (``LEDGER_CAPTURE_GRACE_S``)."""
    return Window(datetime.now(UTC), get_ledger(request).settings.capture_grace_s)


@router.get("/compare")
async def compare(request: Request) -> Response:
    if not signin.signed_in(request):
        return signin.to_sign_in(request)
    given = Counter(name for name, _ in request.query_params.multi_items())
    try:
        wanted = parse_compare(request.query_params, given)
    except compare_query.InvalidCompareQuery as exc:
        return problem(400, str(exc))
    judge = verdicts.health_rules()
    cache = verdicts.JudgementCache.of(request.app.state)
    freshness = get_ledger(request).freshness
    for rollout_id in (wanted.a, wanted.b):
        if rollout_id is not None:
            await freshness.wait_for_rollout(rollout_id)

    def verdicts_of(
        conn: Connection, summaries: list[compare_query.RolloutSummary]
    ) -> dict[str, str]:
        if judge is None:
            return {}
        keys = [(s.rollout_id, s.last_seq) for s in summaries]
        found = verdicts.judge_rollouts(conn, judge, keys, cache)
        return {rollout_id: j.verdict for rollout_id, j in found.items()}

    def read(conn: Connection) -> Response:
        if wanted.task is not None:
            view = compare_query.read_task(conn, wanted.task)
            if view is None:
                return problem(404, f"No rollout reported the task {wanted.task[:200]!r}.")
            judged = verdicts_of(conn, [r.summary for r in view.rollouts])
            return page(f"Task {wanted.task[:200]}", task_body(view, judged))
        if wanted.a is None or wanted.b is None:
            return page("Compare rollouts", empty_body())
        a = compare_query.read_summary(conn, wanted.a)
        b = compare_query.read_summary(conn, wanted.b)
        for name, value, found in (("a", wanted.a, a), ("b", wanted.b, b)):
            if found is None:
                return problem(404, f"{name}: no rollout {value!r} in this ledger.")
        assert a is not None and b is not None
        start, window = wanted.calls_from, compare_query.COMPARE_CALLS
        body = pair_body(
            a,
            b,
            verdicts_of(conn, [a, b]),
            compare_query.scan(conn, a, b, start, compare_query.COMPARE_SCAN),
            compare_query.read_calls(conn, a, start, window),
            compare_query.read_calls(conn, b, start, window),
            start,
        )
        return page(f"Compare {a.rollout_id} and {b.rollout_id}", body)

    return await get_ledger(request).store.read_sync(read)


@router.get("/rollouts/{rollout_id}/transcript")
async def transcript(request: Request, rollout_id: str) -> Response:
    if not signin.signed_in(request):
        return signin.to_sign_in(request)
    if not is_valid_rollout_id(rollout_id):
        return problem(400, f"Invalid rollout id: {rollout_id[:200]!r}")
    try:
        at = parse_page_at(request.query_params)
    except rollout_query.InvalidRolloutQuery as exc:
        return problem(400, str(exc))
    ledger = get_ledger(request)
    await ledger.freshness.wait_for_rollout(rollout_id)
    data = await ledger.store.read_sync(
        lambda conn: transcript_query.read_transcript(conn, rollout_id, at.calls_from)
    )
    if data is None:
        return problem(404, f"No rollout {rollout_id!r} in this ledger.")
    return page(f"Transcript of {rollout_id}", transcript_body(data))


@router.get("/rollouts/{rollout_id}/calls/{call_index}/payload")
async def call_payload(request: Request, rollout_id: str, call_index: str) -> Response:
    if not signin.signed_in(request):
        return (
            signin.to_sign_in(request)
            if "fragment" not in request.query_params
            else (fragment(Html('<p class="error">Sign in again to load this.</p>'), 401))
        )
    if not is_valid_rollout_id(rollout_id):
        return problem(400, f"Invalid rollout id: {rollout_id[:200]!r}")
    if not (call_index.isascii() and call_index.isdigit()) or int(call_index) > MAX_CALL_INDEX:
        return problem(400, "call index: expected a non-negative integer")
    index = int(call_index)
    found = await get_ledger(request).store.read_sync(
        lambda conn: rollout_query.read_call_payload(conn, rollout_id, index)
    )
    if found is None:
        return problem(404, f"Rollout {rollout_id!r} has no call {index}.")
    if found.redacted:
        body = Html('<p class="muted">The payload was redacted by compaction.</p>')
    else:
        body = html(
            '<div class="payload"'
            ' data-call="{i}"><h3>Request</h3>{req}<h3>Response</h3>{resp}</div>',
            i=index,
            req=json_html(found.request),
            resp=json_html(found.response),
        )
    if "fragment" in request.query_params:
        return fragment(body)
    return page(
        f"Call {index} of {rollout_id}",
        html(
            '<p><a href="{back}#call-{i}">← Rollout {id}</a></p><h1>Call {i} of {id}</h1>{body}',
            back=rollout_url(rollout_id),
            i=index,
            id=rollout_id,
            body=body,
        ),
    )


@router.get("/events")
async def events_page(request: Request) -> Response:
    if not signin.signed_in(request):
        return signin.to_sign_in(request)
    ledger = get_ledger(request)
    store = ledger.store
    kinds = store.catalogue.kinds
    given = Counter(name for name, _ in request.query_params.multi_items())
    try:
        flt = parse_tail(request.query_params, given, kinds)
    except InvalidTailQuery as exc:
        return problem(400, str(exc))
    async with store.read() as conn:
        if flt.rollout_id is not None and not await _known(conn, flt.rollout_id):
            return problem(404, f"rollout: no rollout {flt.rollout_id!r} in this ledger.")
        head = await conn.run_sync(ledger.freshness.projected_in)
        newest = await events_query.newest_events(conn, SHOWN, head, flt)
    return page("Live events", events_body(newest, head, flt, kinds), current="events")


async def _known(conn: AsyncConnection, rollout_id: str) -> bool:
    found = await conn.execute(
        select(rollouts.c.rollout_id).where(rollouts.c.rollout_id == rollout_id)
    )
    return found.first() is not None


@router.get("/events/stream")
async def events_stream(request: Request) -> Response:
    if not signin.signed_in(request):
        return Response("sign in first", status_code=401, media_type="text/plain")
    after_text = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    # "head": from the newest event on (the overview's follow wants new events only).
    from_head = after_text == "head"
    if not from_head and (
        not (after_text.isascii() and after_text.isdigit()) or int(after_text) > MAX_SEQ
    ):
        return Response("after: expected a seq or head", status_code=400, media_type="text/plain")
    ledger = get_ledger(request)
    store = ledger.store
    given = Counter(name for name, _ in request.query_params.multi_items())
    try:
        flt = parse_tail(request.query_params, given, store.catalogue.kinds)
    except InvalidTailQuery as exc:
        return Response(str(exc), status_code=400, media_type="text/plain")

    async def stream() -> AsyncIterator[str]:
        # The tail reads the log as far as the views have projected it: a capture's status
        # is its capture_calls row, which follows the log.
        if from_head:
            async with store.read() as conn:
                after = await conn.run_sync(ledger.freshness.projected_in)
        else:
            after = int(after_text)
        started = last_sent = time.monotonic()
        yield "retry: 1000\n\n"
        while time.monotonic() - started < STREAM_LIFETIME_SECONDS:
            if await request.is_disconnected():
                return
            async with store.read() as conn:
                # The bound first: events up to it that the filter leaves out are passed over.
                head = await conn.run_sync(ledger.freshness.projected_in)
                found = await events_query.events_after(conn, after, STREAM_BATCH, flt, head)
            for event in found:
                yield f"id: {event.seq}\ndata: {event_json(event)}\n\n"
            after = found[-1].seq if len(found) == STREAM_BATCH else max(after, head)
            now = time.monotonic()
            if found:
                last_sent = now
                continue
            if now - last_sent > KEEPALIVE_SECONDS:
                last_sent = now
                yield ": keepalive\n\n"
            await asyncio.sleep(STREAM_POLL_SECONDS)  # poll: the log has no push channel

    headers: dict[str, Any] = {**SECURITY_HEADERS, "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
