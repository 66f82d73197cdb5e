"""Attempts side by side and the filtered live tail in a real browser (headless Chromium)
against a real ``ledger serve``: the compare page's order and first difference, the task view,
the links between attempts, copy buttons (and their no-script field), keyboard reach, and a
tail that follows one rollout and tells a 429 from a 200. A run of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.support import compare_data as cmp
from tests.support import viewer_data as data
from tests.support.databases import sqlite_url
from tests.support.server import ServerProcess
from tests.viewer.browser import require_chromium
from tests.viewer.test_browser import upgrade

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    require_chromium()
    root = tmp_path_factory.mktemp("compare")
    url = sqlite_url(root)
    upgrade(url)
    (root / "data").mkdir()
    with ServerProcess(data_dir=root / "data", database_url=url) as started:
        with httpx.Client(base_url=started.base_url) as http:
            cmp.write_compare_run(http)
        started.wait_for_views()
        yield started


def _texts(page: Page, selector: str) -> list[str]:
    found = page.locator(selector).evaluate_all("es => es.map(e => e.textContent.trim())")
    return [str(text) for text in found]


def test_two_attempts_side_by_side_show_where_they_first_differ(
    server: ServerProcess, page: Page, shots: Path
) -> None:
    page.goto(f"{server.base_url}/ui/compare?a=cmp-0&b=cmp-1")
    expect(page.locator("h1")).to_have_text("Compare cmp-0 and cmp-1")
    assert _texts(page, "#compare-summary tbody th")[:6] == [
        "Task",
        "Attempt",
        "State",
        "Resolved",
        "Verdict",
        "Calls",
    ]
    resolved = page.locator('#compare-summary tr[data-fact="Resolved"] td')
    assert _texts(page, '#compare-summary tr[data-fact="Resolved"] td') == ["yes", "no", "differs"]
    expect(resolved.nth(2)).to_be_visible()
    expect(page.locator("#difference-where")).to_have_text(
        "The transcripts first differ at call #1, message 2 of the turn."
        " They agree on calls #0 to #0."
    )
    # Each side: the tool result (its markup as text), then the marked reply that differs.
    for side, reply in (("A", "Patched: f returns 2."), ("B", "I give up.")):
        column = page.locator(f'.compare-side[data-side="{side}"]')
        roles = column.locator(".msg").evaluate_all("ms => ms.map(m => m.dataset.role)")
        assert roles == ["tool", "assistant"]
        expect(column.locator(".msg").first).to_contain_text("<script>window.__pwned = 4")
        expect(column.locator("[data-first-difference]")).to_contain_text(reply)
    assert page.evaluate("window.__pwned === undefined")
    assert _texts(page, "#compare-calls tbody tr td:last-child") == ["same", "first difference"]
    page.set_viewport_size({"width": 1280, "height": 800})
    page.screenshot(path=str(shots / "compare.png"), full_page=True)


def test_ids_copy_in_one_click_and_by_keyboard(
    server: ServerProcess, page: Page, context: BrowserContext
) -> None:
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)
    page.goto(f"{server.base_url}/ui/compare?a=cmp-0&b=cmp-2")
    # From the top of the page, Tab reaches A's copy button (through the links before it).
    page.keyboard.press("Tab")
    expect(page.locator(".skip")).to_be_focused()
    button = page.get_by_role("button", name="Copy rollout id A")
    for _ in range(15):
        page.keyboard.press("Tab")
        if button.evaluate("b => b === document.activeElement"):
            break
    expect(button).to_be_focused()
    page.keyboard.press("Enter")
    expect(button.locator("xpath=..").locator(".copied")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == "cmp-0"
    page.get_by_role("button", name="Copy rollout id B").click()
    assert page.evaluate("navigator.clipboard.readText()") == "cmp-2"
    expect(page.locator("#difference-where")).to_contain_text("call #0, message 3 of the turn")
    expect(page.locator('.compare-side[data-side="B"] [data-first-difference]')).to_contain_text(
        "The call failed: 429."
    )


def test_without_script_an_id_is_a_selectable_read_only_field(
    server: ServerProcess, page: Page, context: BrowserContext
) -> None:
    # Script off for this page (Chromium's own switch, through the DevTools protocol).
    context.new_cdp_session(page).send("Emulation.setScriptExecutionDisabled", {"value": True})
    page.goto(f"{server.base_url}/ui/rollouts/cmp-1")
    expect(page.get_by_role("button", name="Copy rollout id")).to_be_hidden()
    field = page.get_by_role("textbox", name="rollout id")
    expect(field).to_have_value("cmp-1")
    expect(field).to_have_attribute("readonly", "")
    field.focus()
    page.keyboard.press("Control+A")
    selected = field.evaluate("f => f.value.slice(f.selectionStart, f.selectionEnd)")
    assert selected == "cmp-1"
    page.keyboard.press("Backspace")  # read-only: the id stays
    expect(field).to_have_value("cmp-1")


def test_a_task_lists_its_attempts_and_each_compares_with_the_first(
    server: ServerProcess, page: Page
) -> None:
    page.goto(f"{server.base_url}/ui/rollouts/cmp-0")
    links = page.locator("#attempts li > a:first-child")
    assert _texts(page, "#attempts li > a:first-child") == ["cmp-0-a1", "cmp-1", "cmp-2", "cmp-3"]
    expect(links).to_have_count(4)
    page.click("#task-compare")
    expect(page.locator("h1")).to_have_text(f"Rollouts of task {cmp.TASK}")
    assert _texts(page, "#task-rollouts tbody th") == [
        "cmp-0",
        "cmp-0-a1",
        "cmp-1",
        "cmp-2",
        "cmp-3",
    ]
    assert _texts(page, '#task-rollouts td[data-col="difference"]') == [
        "(the reference)",
        "call #2: rollout A has no such call",
        "call #1, message 2 of the turn",
        "call #0, message 3 of the turn",
        "none: the same transcript",
    ]
    page.locator('#task-rollouts tr[data-rollout="cmp-3"]').get_by_role(
        "link", name="Compare"
    ).click()
    expect(page).to_have_url(f"{server.base_url}/ui/compare?a=cmp-0&b=cmp-3")
    expect(page.locator("#difference-where")).to_have_text(
        "No difference: the transcripts are the same from call #0 to their end (#1)."
    )
    # Back on a rollout page, its compare link opens the pair.
    page.goto(f"{server.base_url}/ui/rollouts/cmp-2")
    page.get_by_role("link", name="Compare with cmp-1").click()
    expect(page.locator("h1")).to_have_text("Compare cmp-2 and cmp-1")


def test_a_bad_compare_is_a_clear_page_not_a_crash(
    server: ServerProcess, context: BrowserContext
) -> None:
    page = context.new_page()  # the console reports the 4xx documents: not watched here
    response = page.goto(f"{server.base_url}/ui/compare?a=cmp-0&a=cmp-1&b=cmp-2")
    assert response is not None and response.status == 400
    expect(page.get_by_role("alert")).to_contain_text("a: given 2 times; too many ids")
    response = page.goto(f"{server.base_url}/ui/compare?a=cmp-0&b=gone")
    assert response is not None and response.status == 404
    expect(page.get_by_role("alert")).to_have_text("b: no rollout 'gone' in this ledger.")
    page.close()


def test_the_tail_follows_one_rollout_and_tells_a_429_from_a_200(
    server: ServerProcess, page: Page
) -> None:
    with httpx.Client(base_url=server.base_url) as http:
        first = data.exchange("follow-0", data.T0, data.T0 + 1)
        http.post("/v1/rollouts/follow-me/model-calls", json=first).raise_for_status()
        page.goto(f"{server.base_url}/ui/events")
        page.fill('#tail-filters input[name="rollout"]', "follow-me")
        page.select_option('#tail-filters select[name="kind"]', "model_call.captured")
        page.click('#tail-filters button[type="submit"]')
        expect(page).to_have_url(
            f"{server.base_url}/ui/events?rollout=follow-me&kind=model_call.captured"
        )
        expect(page.locator("#tail-status")).to_contain_text("Live")
        rows = page.locator("#tail tbody tr")
        expect(rows).to_have_count(1)
        failed = data.exchange("follow-1", data.T0 + 2, data.T0 + 3, status_code=429)
        failed["error_category"] = "rate_limited"
        http.post("/v1/rollouts/follow-me/model-calls", json=failed).raise_for_status()
        other = data.exchange("elsewhere-0", data.T0, data.T0 + 1)
        http.post("/v1/rollouts/elsewhere/model-calls", json=other).raise_for_status()
        late = data.exchange("follow-2", data.T0 + 4, data.T0 + 5)
        http.post("/v1/rollouts/follow-me/model-calls", json=late).raise_for_status()
        expect(rows).to_have_count(3)
        # Newest first; the other rollout's event is not there.
        assert _texts(page, '#tail tbody td[data-col="status"]') == [
            "200",
            "✕ failed 429 (rate_limited)",
            "200",
        ]
        expect(rows.nth(1).locator(".tag.failed")).to_be_visible()
        expect(page.locator("#tail tbody", has_text="elsewhere")).to_have_count(0)


def test_the_overview_follows_new_rollouts_when_asked(server: ServerProcess, page: Page) -> None:
    page.goto(f"{server.base_url}/ui/?id=fresh-*")
    rows = page.locator("#rollouts tbody tr[data-rollout]")
    expect(rows).to_have_count(0)
    page.evaluate("window.__same_document = true")  # gone if the page were reloaded
    follow = page.get_by_role("button", name="Follow new rollouts")
    follow.focus()
    page.keyboard.press("Enter")
    expect(follow).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#follow-status")).to_have_text("Following new rollouts.")
    with httpx.Client(base_url=server.base_url) as http:
        for rollout_id in ("fresh-2", "fresh-10", "other-1"):
            body = data.exchange(f"{rollout_id}-m", data.T0, data.T0 + 1)
            http.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body).raise_for_status()
    # The same filter and sort as the page: two rows, in id order; the other left out.
    expect(rows).to_have_count(2)
    ids = rows.evaluate_all("rs => rs.map(r => r.dataset.rollout)")
    assert ids == ["fresh-10", "fresh-2"]
    expect(page.locator("#follow-status")).to_contain_text("Following: updated after event #")
    assert page.evaluate("window.__same_document") is True
    follow.click()
    expect(follow).to_have_attribute("aria-pressed", "false")
    expect(page.locator("#follow-status")).to_have_text("Not following.")
