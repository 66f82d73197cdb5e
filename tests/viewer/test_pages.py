"""The viewer's pages over HTTP, in-process, on both backends: the SQL behind the overview
(filters, keyset paging, sorting), bad input answered 4xx in HTML, the read token, headers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.areas.viewer.rollout_query import CALLS_PER_PAGE, EVENTS_PER_PAGE
from ledger.gym.lineage import CONTROL_ROUTE_PREFIX
from tests.conftest import CONTROL_HEADERS
from tests.support import viewer_data as data

ROLLOUTS = [f"run-{i:02d}" for i in range(23)] + ["odd_ab", "oddxab"]


async def _capture(client: httpx.AsyncClient, rollout_id: str, n: int) -> None:
    body = data.exchange(f"{rollout_id}-{n}", data.T0 + n, data.T0 + n + 0.5)
    (await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body)).raise_for_status()


@pytest.fixture
async def filled(client: httpx.AsyncClient) -> httpx.AsyncClient:
    for i, rollout_id in enumerate(ROLLOUTS):
        for n in range(i % 4 + 1):
            await _capture(client, rollout_id, n)
    retired = await client.post(
        f"{CONTROL_ROUTE_PREFIX}/rollouts/retire",
        json={"rollout_ids": ["run-05"]},
        headers=CONTROL_HEADERS,
    )
    retired.raise_for_status()
    return client


def _ids(text: str) -> list[str]:
    return re.findall(r'<tr data-rollout="([^"]+)"', text)


def _next(text: str) -> str | None:
    found = re.search(r'<a href="([^"]+)" rel="next">', text)
    return None if found is None else found.group(1).replace("&amp;", "&")


async def _all_pages(client: httpx.AsyncClient, first: str) -> list[list[str]]:
    pages = []
    url: str | None = first
    while url is not None:
        reply = await client.get(url)
        assert reply.status_code == 200, reply.text
        pages.append(_ids(reply.text))
        url = _next(reply.text)
    return pages


async def test_keyset_pages_cover_every_rollout_once_in_order(filled: httpx.AsyncClient) -> None:
    pages = await _all_pages(filled, "/ui/?limit=25")
    assert [len(p) for p in pages] == [25]
    pages = await _all_pages(filled, "/ui/?limit=25&sort=id&dir=desc")
    assert pages[0] == sorted(ROLLOUTS, reverse=True)
    # Sorted by calls (i % 4 + 1), most first, ties by id descending, across pages.
    calls = {rollout_id: i % 4 + 1 for i, rollout_id in enumerate(ROLLOUTS)}
    expected = sorted(ROLLOUTS, key=lambda r: (calls[r], r), reverse=True)
    pages = await _all_pages(filled, "/ui/?limit=25&sort=calls&dir=desc")
    assert [r for p in pages for r in p] == expected


async def test_sorted_by_last_event_newest_first(filled: httpx.AsyncClient) -> None:
    pages = await _all_pages(filled, "/ui/?sort=last_event&dir=desc&limit=25")
    ordered = [r for p in pages for r in p]
    assert ordered[0] == "run-05"  # retired last
    assert ordered[1:] == [r for r in reversed(ROLLOUTS) if r != "run-05"]


async def test_filters_select_the_right_rows(filled: httpx.AsyncClient) -> None:
    assert _ids((await filled.get("/ui/?id=run-1*")).text) == [f"run-{i}" for i in range(10, 20)]
    assert _ids((await filled.get("/ui/?id=run-0?")).text) == [f"run-0{i}" for i in range(10)]
    # _ is a literal character in a glob, not the SQL wildcard.
    assert _ids((await filled.get("/ui/?id=odd_*")).text) == ["odd_ab"]
    assert _ids((await filled.get("/ui/?id=odd?ab")).text) == ["odd_ab", "oddxab"]
    assert _ids((await filled.get("/ui/?state=retired")).text) == ["run-05"]
    live = _ids((await filled.get("/ui/?state=live&limit=50")).text)
    assert "run-05" not in live and len(live) == len(ROLLOUTS) - 1
    summary = (await filled.get("/ui/?id=run-0*")).text
    assert re.search(r"<dt>Rollouts \(all attempts\)</dt><dd>10</dd>", summary)
    # run-00..run-09 have 1, 2, 3, 4, 1, 2, 3, 4, 1, 2 calls
    assert re.search(r"<dt>Model calls</dt><dd>23</dd>", summary)
    assert re.search(r"<dt>Tokens in</dt><dd>2,300</dd>", summary)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("sort=bogus", "sort: expected one of"),
        ("dir=sideways", "dir: expected asc or desc"),
        ("limit=7", "limit: expected one of"),
        ("state=dead", "state: expected live or retired"),
        ("gaps=maybe", "gaps: expected yes or no"),
        ("after=%%%", "after: not a cursor"),
        ("after=WyJ4IiwieSJd&sort=calls", "after: not a cursor for this sort"),
        ("id=" + "x" * 201, "id: glob longer than 200"),
        ("verdict=failed", "verdict: "),
    ],
)
async def test_bad_overview_parameters_are_a_400_naming_them(
    client: httpx.AsyncClient, query: str, message: str
) -> None:
    reply = await client.get(f"/ui/?{query}")
    assert reply.status_code == 400
    assert reply.headers["content-type"].startswith("text/html")
    assert message in reply.text


async def test_rollout_and_payload_errors(filled: httpx.AsyncClient) -> None:
    assert (await filled.get("/ui/rollouts/nope")).status_code == 404
    assert (await filled.get("/ui/rollouts/a%20b")).status_code == 400
    for bad, name in [
        ("calls_from=-1", "calls_from: expected a call index"),
        ("calls_from=99999999999", "calls_from: expected a call index"),
        ("events_before=x", "events_before: expected an event seq"),
    ]:
        reply = await filled.get(f"/ui/rollouts/run-01?{bad}")
        assert reply.status_code == 400 and name in reply.text, bad
    assert (await filled.get("/ui/rollouts/run-01/calls/9/payload")).status_code == 404
    assert (await filled.get("/ui/rollouts/run-01/calls/-1/payload")).status_code == 400
    assert (await filled.get("/ui/rollouts/run-01/calls/1/payload?fragment=1")).status_code == 200
    assert (await filled.get("/ui/static/viewer-0000.css")).status_code == 404


async def test_every_page_sends_a_strict_content_security_policy(
    filled: httpx.AsyncClient,
) -> None:
    page = await filled.get("/ui/")
    for path in ["/ui/", "/ui/rollouts/run-01", "/ui/events", "/ui/sign-in"]:
        reply = await filled.get(path)
        assert reply.status_code == 200
        policy = reply.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "unsafe-inline" not in policy
        assert reply.headers["x-content-type-options"] == "nosniff"
    assets = re.findall(r'(?:href|src)="(/ui/static/[^"]+)"', page.text)
    assert len(assets) == 3
    for asset in assets:
        assert (await filled.get(asset)).status_code == 200


@pytest.fixture
async def guarded(tmp_path: Path, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        data_dir=tmp_path / "guarded",
        database_url=database_url,
        control_token="control-secret",
        read_token="read-secret",
    )
    application: FastAPI = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http


async def test_the_read_token_protects_the_pages(guarded: httpx.AsyncClient) -> None:
    for path in ["/ui/", "/ui/rollouts/x", "/ui/events", "/ui/rollouts/x/calls/0/payload"]:
        reply = await guarded.get(path)
        assert reply.status_code == 303, path
        assert reply.headers["location"].startswith("/ui/sign-in?next=")
    assert (await guarded.get("/ui/events/stream")).status_code == 401
    wrong = await guarded.post("/ui/sign-in", data={"token": "guess", "next": "/ui/events"})
    assert wrong.status_code == 401 and "Wrong token" in wrong.text
    assert "set-cookie" not in wrong.headers
    # Never an open redirect: only a viewer path is followed after sign-in.
    right = await guarded.post(
        "/ui/sign-in", data={"token": "read-secret", "next": "https://elsewhere.example/"}
    )
    assert right.status_code == 303 and right.headers["location"] == "/ui/"
    cookie = right.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "read-secret" not in cookie
    assert (await guarded.get("/ui/")).status_code == 200
    # The bearer header works as for the JSON routes.
    guarded.cookies.clear()
    header = {"Authorization": "Bearer read-secret"}
    assert (await guarded.get("/ui/", headers=header)).status_code == 200
    assert (await guarded.get("/ui/")).status_code == 303


# A page of calls is ~1.5 KB a call; the bound leaves room for the rest of the page, and is
# far below what 3,000 calls render to (~5 MB) when they are not paged.
PAGE_BYTES_BOUND = 600_000


def _failing(index: int) -> bool:
    return index % 7 == 3


async def _fill_calls(client: httpx.AsyncClient, rollout_id: str, count: int) -> None:
    for start in range(0, count, 1000):
        items = [
            {
                "rollout_id": rollout_id,
                "exchange": data.exchange(
                    f"{rollout_id}-{i}",
                    data.T0 + i,
                    data.T0 + i + 0.5,
                    status_code=500 if _failing(i) else 200,
                ),
            }
            for i in range(start, min(count, start + 1000))
        ]
        reply = await client.post("/v1/model-calls/batch", json={"items": items})
        reply.raise_for_status()
        assert {r["status"] for r in reply.json()["results"]} == {201}


def _pager_link(text: str, name: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" data-pager="{name}">', text)
    return None if found is None else found.group(1).replace("&amp;", "&")


def _call_rows(text: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr id="call-\d+" data-call="(\d+)">', text)]


def _event_rows(text: str) -> list[int]:
    events = text[text.index('<table id="events">') :]
    return [int(seq) for seq in re.findall(r'<tr><td class="num">(\d+)</td>', events)]


async def test_a_long_rollout_renders_in_bounded_bytes_and_pages_to_the_rest(
    client: httpx.AsyncClient,
) -> None:
    # Not a whole number of pages: the last page of calls and the oldest of events are short.
    few, many = 3 * CALLS_PER_PAGE, 30 * CALLS_PER_PAGE + 7
    await _fill_calls(client, "few", few)
    await _fill_calls(client, "many", many)
    first_few = await client.get("/ui/rollouts/few")
    first_many = await client.get("/ui/rollouts/many")
    assert first_few.status_code == first_many.status_code == 200
    # Ten times the calls, the same page: its size does not grow with the rollout.
    assert len(first_few.content) < PAGE_BYTES_BOUND
    assert len(first_many.content) < PAGE_BYTES_BOUND
    assert len(first_many.content) < 1.05 * len(first_few.content)
    # The facts count the whole rollout; the timeline draws the page's calls.
    failed = sum(1 for i in range(many) if _failing(i))
    assert f"<dd>{many:,} ({failed:,} failed, 0 truncated, 0 pending)</dd>" in first_many.text
    assert first_many.text.count('data-kind="call"') == CALLS_PER_PAGE
    assert 'id="timeline-scope"' in first_many.text
    assert _pager_link(first_many.text, "calls-previous") is None

    # "Next calls" walks every call once, in order, a page at a time; "Previous" goes back.
    seen: list[int] = []
    url: str | None = "/ui/rollouts/many"
    pages = 0
    while url is not None:
        reply = await client.get(url)
        assert reply.status_code == 200, url
        rows = _call_rows(reply.text)
        assert 0 < len(rows) <= CALLS_PER_PAGE
        assert len(reply.content) < PAGE_BYTES_BOUND
        seen.extend(rows)
        pages += 1
        if pages == 2:
            back = _pager_link(reply.text, "calls-previous")
            assert back is not None
            assert _call_rows((await client.get(back)).text) == list(range(CALLS_PER_PAGE))
        url = _pager_link(reply.text, "calls-next")
    assert seen == list(range(many))
    assert pages == 31

    # The events: the newest page first, "Older events" down to the first, "Newer" back up,
    # each event on exactly one page.
    every = (await client.get("/v1/events?rollout_id=many&limit=1000")).json()["events"]
    while len(every) < many:
        after = every[-1]["seq"]
        more = await client.get(f"/v1/events?rollout_id=many&after={after}&limit=1000")
        every.extend(more.json()["events"])
    seqs = [e["seq"] for e in every]
    newest = _event_rows(first_many.text)
    assert newest == seqs[-EVENTS_PER_PAGE:]
    collected = newest
    older = _pager_link(first_many.text, "events-older")
    oldest_page = first_many.text
    while older is not None:
        reply = await client.get(older)
        assert len(reply.content) < PAGE_BYTES_BOUND
        collected = _event_rows(reply.text) + collected
        oldest_page, older = reply.text, _pager_link(reply.text, "events-older")
    assert collected == seqs
    climbed = _event_rows(oldest_page)
    newer = _pager_link(oldest_page, "events-newer")
    while newer is not None:
        reply = await client.get(newer)
        climbed += _event_rows(reply.text)
        newer = _pager_link(reply.text, "events-newer")
    assert climbed == seqs
