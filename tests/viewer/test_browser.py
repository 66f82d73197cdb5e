"""The viewer in a real browser (headless Chromium) against a real ``ledger serve``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, expect

from ledger.areas.viewer.timeline import MIN_BAR
from ledger.log import migrate
from tests.support import viewer_data as data
from tests.support.databases import sqlite_url
from tests.support.server import ServerProcess
from tests.viewer.browser import follow, require_chromium, rollout_ids

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SMALL = 30  # small-00 .. small-29, (i % 3) + 1 calls each
RETIRED = ["small-03", "small-04"]


def upgrade(url: str) -> None:
    """Migrate on a thread of its own: sync Playwright runs an event loop on this one."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, migrate.upgrade(url)).result()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    require_chromium()
    root = tmp_path_factory.mktemp("viewer")
    url = sqlite_url(root)
    upgrade(url)
    (root / "data").mkdir()
    with ServerProcess(data_dir=root / "data", database_url=url) as started:
        with httpx.Client(base_url=started.base_url) as http:
            data.write_rich(http, data.RichRollout())
            for i in range(SMALL):
                data.write_small(http, f"small-{i:02d}", i % 3 + 1)
            data.retire(http, data.control_token(root / "data"), RETIRED)
        started.wait_for_views()
        yield started


def test_timeline_has_one_bar_per_call_and_tool_in_order_and_to_scale(
    server: ServerProcess, page: Page, shots: Path
) -> None:
    rich = data.RichRollout()
    page.goto(f"{server.base_url}/ui/rollouts/{rich.rollout_id}")
    bars = page.locator("svg.timeline rect.bar")
    found = bars.evaluate_all(
        """rects => rects.map(r => ({kind: r.dataset.kind, index: Number(r.dataset.index),
            x: r.x.baseVal.value, y: r.y.baseVal.value, width: r.width.baseVal.value,
            cls: r.getAttribute('class')}))"""
    )
    calls = sorted((b for b in found if b["kind"] == "call"), key=lambda b: b["x"])
    tools = sorted((b for b in found if b["kind"] == "tool"), key=lambda b: b["index"])
    assert [b["index"] for b in calls] == list(range(len(rich.calls)))
    assert len(tools) == len(rich.tools)
    # One time axis: every bar's width is its duration times the same scale, and its x is
    # its start on that scale.
    scale = float(page.locator("svg.timeline").get_attribute("data-scale") or "0")
    assert scale > 0
    # (never narrower than MIN_BAR, so a short failure stays visible).
    for bar, (_, start, end) in zip(calls, rich.calls, strict=True):
        assert bar["width"] == pytest.approx(max((end - start) * scale, MIN_BAR), abs=0.02)
    for bar, (_, _, start, end) in zip(tools, rich.tools, strict=True):
        assert bar["width"] == pytest.approx(max((end - start) * scale, MIN_BAR), abs=0.02)
    x0 = calls[0]["x"]
    assert calls[2]["x"] - x0 == pytest.approx(4.0 * scale, abs=0.02)
    # Marked: call 1 failed, call 2 truncated, tool t2 failed; the pending call is counted.
    assert "failed" in calls[1]["cls"] and "truncated" in calls[2]["cls"]
    assert "failed" in tools[2]["cls"] and "failed" not in tools[1]["cls"]
    expect(page.locator(".legend .pending")).to_contain_text("1 pending")
    # Grouped by invocation: the subagent's calls lie below the root's, its parallel tools
    # in two lanes.
    assert calls[2]["y"] > calls[1]["y"] == calls[0]["y"]
    assert tools[1]["y"] != tools[2]["y"]
    lanes = page.locator("svg.timeline g.lane").evaluate_all("gs => gs.map(g => g.dataset.lane)")
    assert lanes == ["root", "subagent sub"]
    # The invocation tree, with the gap next to the subagent it is about.
    expect(page.locator('#invocations li[data-invocation="sub"] .finding')).to_contain_text(
        "sandbox_observation_unavailable"
    )
    expect(page.locator("#calls tr[data-call]")).to_have_count(len(rich.calls))
    expect(page.locator("#calls tr.pending")).to_contain_text("c-late")
    expect(page.locator("#events tbody tr")).not_to_have_count(0)
    expect(page.locator("#fence")).to_contain_text("live")
    manifest = page.locator("#manifest tbody tr")
    expect(manifest).to_have_count(3)
    expect(manifest.nth(1)).to_contain_text("worker_capture_failed")
    expect(manifest.nth(2)).to_contain_text("c0")  # the child's parent
    page.screenshot(path=str(shots / "rollout.png"), full_page=True)


def test_a_retired_rollout_shows_its_fence(server: ServerProcess, page: Page) -> None:
    page.goto(f"{server.base_url}/ui/rollouts/{RETIRED[0]}")
    expect(page.locator("#fence")).to_contain_text("fenced")
    expect(page.locator("#events tbody tr").last).to_contain_text("rollout.retired")


def test_a_bar_is_reached_by_keyboard_and_opens_its_row(server: ServerProcess, page: Page) -> None:
    page.goto(f"{server.base_url}/ui/rollouts/rich-0")
    first_bar = page.locator("svg.timeline a").first
    first_bar.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#call-0$"))


def test_a_payload_with_markup_renders_as_text(
    server: ServerProcess, page: Page, shots: Path
) -> None:
    page.goto(f"{server.base_url}/ui/rollouts/rich-0")
    details = page.locator('details[data-src*="/calls/2/"]')
    details.locator("summary").click()
    payload = details.locator(".payload")
    expect(payload).to_contain_text(data.MARKUP)
    assert payload.locator("script, b").count() == 0
    assert page.evaluate("window.__pwned === undefined")
    payload.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "payload.png"))
    # Without script the same payload is its own page.
    response = httpx.get(f"{server.base_url}/ui/rollouts/rich-0/calls/2/payload")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "<script>window" not in response.text
    assert "&lt;script&gt;window.__pwned" in response.text


def test_overview_filters_return_the_right_rows(
    server: ServerProcess, page: Page, shots: Path
) -> None:
    page.goto(f"{server.base_url}/ui/")
    page.screenshot(path=str(shots / "overview.png"), full_page=True)
    page.fill('input[name="id"]', "small-1*")
    follow(page, 'form.filters button[type="submit"]')
    assert rollout_ids(page) == [f"small-{i}" for i in range(10, 20)]
    page.select_option('select[name="state"]', "retired")
    follow(page, 'form.filters button[type="submit"]')
    assert rollout_ids(page) == []
    page.goto(f"{server.base_url}/ui/?state=retired")
    assert rollout_ids(page) == RETIRED
    expect(page.locator(".card", has_text="Quality")).to_contain_text("0 / 2")
    # A capture-only rollout has gaps too (its calls are not attributed to an invocation).
    page.goto(f"{server.base_url}/ui/?gaps=yes&limit=100")
    assert rollout_ids(page) == sorted(["rich-0", *(f"small-{i:02d}" for i in range(SMALL))])
    record = httpx.get(f"{server.base_url}/v1/rollouts/small-00/record").json()
    assert record["ng_trajectory"]["gaps"]
    page.goto(f"{server.base_url}/ui/?gaps=no")
    assert rollout_ids(page) == []
    page.goto(f"{server.base_url}/ui/?id=small-0%3F")
    assert rollout_ids(page) == [f"small-0{i}" for i in range(10)]


def test_overview_sorts_and_pages_by_keyset_and_back_works(
    server: ServerProcess, page: Page
) -> None:
    everything = sorted(["rich-0", *(f"small-{i:02d}" for i in range(SMALL))])
    page.goto(f"{server.base_url}/ui/?limit=25")
    seen = rollout_ids(page)
    assert seen == everything[:25]
    follow(page, "a[rel=next]")
    assert rollout_ids(page) == everything[25:]
    expect(page.locator("a[rel=next]")).to_have_count(0)
    page.go_back()
    assert rollout_ids(page) == everything[:25]
    # Sorted by calls, most first, ties by id descending; a click on the heading sorts.
    follow(page, 'th a:has-text("Calls")')
    ranked = rollout_ids(page)
    assert ranked[0] == "rich-0"
    counts = {f"small-{i:02d}": i % 3 + 1 for i in range(SMALL)}
    expected_small = sorted(counts, key=lambda k: (counts[k], k), reverse=True)
    follow(page, "a[rel=next]")
    assert ranked[1:] + rollout_ids(page) == expected_small


def test_the_live_tail_shows_a_new_event_without_a_reload_and_pauses(
    server: ServerProcess, page: Page, shots: Path
) -> None:
    page.goto(f"{server.base_url}/ui/events")
    expect(page.locator("#tail-status")).to_contain_text("Live", timeout=5000)
    # A reload would drop this mark: the new row must arrive through the stream.
    page.evaluate("document.documentElement.dataset.mark = 'before'")
    with httpx.Client(base_url=server.base_url) as http:
        http.post(
            "/v1/rollouts/tail-1/model-calls", json=data.exchange("tail-a", data.T0, data.T0 + 1)
        ).raise_for_status()
        # Generous: how fast it arrives is the machine's business, not this test's.
        expect(page.locator("#tail tbody tr").first).to_contain_text("tail-1", timeout=15_000)
        assert page.evaluate("document.documentElement.dataset.mark") == "before"
        page.screenshot(path=str(shots / "events.png"))
        page.click("#tail-toggle")
        expect(page.locator("#tail-status")).to_contain_text("Paused")
        http.post(
            "/v1/rollouts/tail-2/model-calls", json=data.exchange("tail-b", data.T0, data.T0 + 1)
        ).raise_for_status()
        page.click("#tail-toggle")
        # Resumed after the last seq it saw: the event recorded while paused arrives.
        expect(page.locator("#tail tbody tr").first).to_contain_text("tail-2", timeout=5000)
    expect(page.locator("#tail tbody tr", has_text="tail-1")).to_have_count(1)


def test_links_lead_from_the_overview_to_a_rollout_and_back(
    server: ServerProcess, page: Page
) -> None:
    page.goto(f"{server.base_url}/ui/?id=rich*")
    page.click('a:has-text("rich-0")')
    expect(page).to_have_url(f"{server.base_url}/ui/rollouts/rich-0")
    expect(page.locator("h1")).to_contain_text("rich-0")
    page.go_back()
    expect(page).to_have_url(f"{server.base_url}/ui/?id=rich*")


def test_sign_in_with_the_read_token_and_a_wrong_token_is_refused(
    tmp_path: Path, context: BrowserContext, shots: Path
) -> None:
    url = sqlite_url(tmp_path)
    upgrade(url)
    (tmp_path / "data").mkdir()
    env = {"LEDGER_READ_TOKEN": "s3cret-read"}
    with ServerProcess(data_dir=tmp_path / "data", database_url=url, env=env) as server:
        page = context.new_page()
        page.goto(f"{server.base_url}/ui/events")
        expect(page).to_have_url(re.compile(r"/ui/sign-in\?next="))
        page.fill("#token", "wrong")
        with page.expect_response(re.compile(r"/ui/sign-in$")) as refused:
            page.click('button:has-text("Sign in")')
        assert refused.value.status == 401
        expect(page.locator("#sign-in-error")).to_contain_text("Wrong token")
        page.screenshot(path=str(shots / "sign-in-refused.png"))
        assert httpx.get(f"{server.base_url}/ui/", follow_redirects=False).status_code == 303
        page.fill("#token", "s3cret-read")
        page.click('button:has-text("Sign in")')
        expect(page).to_have_url(f"{server.base_url}/ui/events")
        expect(page.locator("h1")).to_have_text("Live events")
        cookie = next(c for c in context.cookies() if c["name"] == "ledger_read_token")
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
        assert cookie["value"] != "s3cret-read"
        page.close()
