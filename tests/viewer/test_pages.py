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
    assert re.search(r"<dt>Rollouts</dt><dd>10</dd>", summary)
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
