"""Reading a run in a real browser (headless Chromium) against a real ``ledger serve``: the
transcript of each dialect. A run of its own, so the other browser tests' counts hold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support import viewer_data as data
from tests.support.databases import sqlite_url
from tests.support.server import ServerProcess
from tests.viewer.browser import follow, require_chromium, rollout_ids
from tests.viewer.test_browser import upgrade

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The roles each dialogue shows, turn by turn: the second request's history is not repeated.
ROLES = {
    "talk-chat": [["system", "user", "assistant"], ["assistant"]],
    "talk-responses": [["system", "user", "assistant", "assistant"], ["assistant"]],
    "talk-messages": [["system", "user", "assistant"], ["assistant"]],
}
# (tool call id, the name shown, a line of its pretty-printed arguments, its result's start)
TOOLS = {
    "talk-chat": ("call_read", "read_file", '"path": "a.txt",', data.HOSTILE),
    "talk-responses": ("fc_ls", "shell", '"cmd": "ls"', "invoice_⟦U+202E⟧gnp.exe"),
    "talk-messages": ("tu_1", "bash", '"cmd": "pytest -q"', data.HOSTILE),
}
# A small run of two tasks in Gym's ids, with a retry.
TASK_RUN = ["0-0", "0-1", "0-2", "0-10", "0-2-a1", "1-0", "1-9", "1-11"]
TASK_OF = {"0": "swe-verified/django__django-11099", "1": "swe-verified/flask-4045"}
ANSWERS = {
    "talk-chat": "The file holds markup and a renamed exe.",
    "talk-responses": "Two files.",
    "talk-messages": "One test failed.",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    require_chromium()
    root = tmp_path_factory.mktemp("reading")
    url = sqlite_url(root)
    upgrade(url)
    (root / "data").mkdir()
    with ServerProcess(data_dir=root / "data", database_url=url) as started:
        with httpx.Client(base_url=started.base_url) as http:
            data.write_dialogues(http)
            for n, rollout_id in enumerate(TASK_RUN):
                body = data.exchange(f"{rollout_id}-m", data.T0, data.T0 + 1 + n % 4)
                http.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body).raise_for_status()
                result = {"task_id": TASK_OF[rollout_id[0]], "resolved": n % 3 == 0}
                http.post(f"/v1/rollouts/{rollout_id}/result", json=result).raise_for_status()
        started.wait_for_views()
        yield started


@pytest.mark.parametrize("rollout_id", sorted(data.DIALOGUES))
def test_a_transcript_reads_in_order_with_tool_results_beside_their_calls(
    server: ServerProcess, page: Page, shots: Path, rollout_id: str
) -> None:
    page.goto(f"{server.base_url}/ui/rollouts/{rollout_id}/transcript")
    turns = page.locator("#transcript section.turn")
    expect(turns).to_have_count(2)
    roles = [
        turns.nth(n).locator(":scope > .msg").evaluate_all("ms => ms.map(m => m.dataset.role)")
        for n in range(2)
    ]
    assert roles == ROLES[rollout_id]
    call_id, name, argument, result = TOOLS[rollout_id]
    box = turns.nth(0).locator(f'.tool-call[data-tool-call="{call_id}"]')
    expect(box.locator(".part-head").first).to_contain_text(name)
    expect(box.locator("pre.args")).to_contain_text(argument)
    # The result sits in the same box as the call, as text: the markup did not run.
    expect(box.locator(f'.tool-result[data-result-of="{call_id}"] .text').first).to_contain_text(
        result[:40]
    )
    assert box.locator(".tool-result img, .tool-result script").count() == 0
    assert page.evaluate("window.__pwned === undefined")
    expect(turns.nth(1).locator(".msg").last).to_have_text(f"assistant{ANSWERS[rollout_id]}")
    # Reasoning starts collapsed and opens on a click.
    reasoning = turns.nth(0).locator("details.reasoning")
    assert reasoning.evaluate("d => d.open") is False
    reasoning.locator("summary").click()
    assert reasoning.evaluate("d => d.open") is True
    # The turn's heading links to its call row, with tokens and latency beside it.
    expect(turns.nth(1).locator(".turn-meta [data-meta=latency]")).to_have_text("1,500 ms")
    turns.nth(1).locator(".turn-head a").click()
    expect(page.locator("#call-1")).to_be_visible()
    assert page.url.endswith(f"/ui/rollouts/{rollout_id}#call-1")
    page.go_back()
    if rollout_id == "talk-chat":
        page.set_viewport_size({"width": 1000, "height": 900})
        page.screenshot(path=str(shots / "transcript.png"), full_page=True)


def test_a_long_line_is_folded_with_its_size_and_an_rtl_override_shows_as_a_code_point(
    server: ServerProcess, page: Page
) -> None:
    page.goto(f"{server.base_url}/ui/rollouts/talk-responses/transcript")
    fold = page.locator('.tool-result[data-result-of="fc_ls"] details.fold')
    expect(fold.locator("summary")).to_contain_text("Long text · 1,000,0")
    assert fold.evaluate("d => d.open") is False
    shown = fold.locator(".text").evaluate("e => e.textContent")
    # Cut at 20,000 characters, the override among them written as its code point.
    assert len(shown) == 20_000 - 1 + len("⟦U+202E⟧") and "\u202e" not in shown
    assert "⟦U+202E⟧" in shown
    # Tab from the top reaches the tabs, then the first turn's link.
    page.keyboard.press("Tab")  # the skip link
    expect(page.locator(".skip")).to_be_focused()
    page.locator("nav.tabs a").last.focus()
    page.keyboard.press("Tab")
    expect(page.locator("#turn-0 .turn-head a")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#call-0")).to_be_visible()
    assert page.url.endswith("/ui/rollouts/talk-responses#call-0")


def test_the_overview_answers_per_task_questions(
    server: ServerProcess, page: Page, shots: Path
) -> None:
    page.goto(f"{server.base_url}/ui/?task_has=swe-verified")
    tasks = page.locator("#tasks tbody tr")
    expect(tasks).to_have_count(2)
    expect(tasks.first).to_contain_text("swe-verified/django__django-11099")
    # 5 rollouts (all attempts), 4 latest attempts.
    expect(tasks.first.locator("td").nth(1)).to_have_text("5")
    expect(tasks.first.locator("td").nth(2)).to_have_text("4")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.screenshot(path=str(shots / "overview-tasks.png"), full_page=True)
    # The Rollout heading sorts by task and rollout numbers.
    follow(page, '#rollouts th a:has-text("Rollout")')
    assert rollout_ids(page) == ["0-0", "0-1", "0-2", "0-2-a1", "0-10", "1-0", "1-9", "1-11"]
    # The task's link filters on it exactly; the resolved filter narrows further.
    follow(page, '#tasks a:has-text("flask-4045")')
    assert rollout_ids(page) == ["1-0", "1-9", "1-11"]
    expect(page.locator('input[name="task"]')).to_have_value("swe-verified/flask-4045")
    page.select_option('select[name="resolved"]', "yes")
    follow(page, 'form.filters button[type="submit"]')
    assert rollout_ids(page) == ["1-9"]  # the 7th of the run: n % 3 == 0
    expect(page.locator('#rollouts tr[data-rollout="1-9"] [data-col=resolved]')).to_contain_text(
        "yes"
    )
    page.fill('input[name="task"]', "")
    page.fill('input[name="task_has"]', "django")
    page.select_option('select[name="resolved"]', "")
    follow(page, 'form.filters button[type="submit"]')
    assert sorted(rollout_ids(page)) == sorted(["0-0", "0-1", "0-2", "0-10", "0-2-a1"])
    expect(page.locator('#rollouts tr[data-rollout="0-2-a1"] [data-col=attempt]')).to_have_text("1")
