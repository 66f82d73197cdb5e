"""The call evidence in the viewer, in a real browser (headless Chromium) against a real
``ledger serve``: the rollout page lists each call with its lineage row, intent and capture
and names what is missing or pending; the overview filters rollouts by it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.lineage.rows import failure_row
from tests.support import viewer_data as data
from tests.support.databases import sqlite_url
from tests.support.server import ServerProcess
from tests.viewer.browser import follow, require_chromium, rollout_ids, screenshots_dir
from tests.viewer.test_browser import upgrade

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Long enough that a live rollout's uncaptured call stays pending for the whole module;
# retiring a rollout names its uncaptured calls missing at once.
GRACE_S = "3600"


def admit(http: httpx.Client, rollout_id: str, calls: list[str]) -> None:
    """What Gym writes before and at dispatch: an intent and a lineage row per call."""
    http.post(
        f"/v1/rollouts/{rollout_id}/model-calls/intents", json={"model_call_ids": calls}
    ).raise_for_status()
    for model_call_id in calls:
        row = failure_row(model_call_id)
        http.post(f"/v1/rollouts/{rollout_id}/ledger/rows", json=row).raise_for_status()


def capture(http: httpx.Client, rollout_id: str, calls: list[str]) -> None:
    for n, model_call_id in enumerate(calls):
        body = data.exchange(model_call_id, data.T0 + n, data.T0 + n + 0.5)
        http.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body).raise_for_status()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    require_chromium()
    root = tmp_path_factory.mktemp("viewer-evidence")
    url = sqlite_url(root)
    upgrade(url)
    (root / "data").mkdir()
    env = {"LEDGER_CAPTURE_GRACE_S": GRACE_S}
    with ServerProcess(data_dir=root / "data", database_url=url, env=env) as started:
        with httpx.Client(base_url=started.base_url) as http:
            # Every call admitted and captured.
            admit(http, "ev-complete", ["ok-1", "ok-2"])
            capture(http, "ev-complete", ["ok-1", "ok-2"])
            # One call lost its capture; one capture has no lineage row.
            admit(http, "ev-missing", ["m-1", "m-2", "m-3"])
            capture(http, "ev-missing", ["m-1", "m-3", "m-stray"])
            # Observability off: rows and intents only.
            admit(http, "ev-off", ["off-1", "off-2"])
            # Live, within the window: the uncaptured call is pending.
            admit(http, "ev-pending", ["p-1", "p-2"])
            capture(http, "ev-pending", ["p-1"])
            # Captures only (the capture proxy, no plug-in): nothing to reconcile them with.
            capture(http, "ev-proxy", ["x-1"])
            token = data.control_token(root / "data")
            data.retire(http, token, ["ev-complete", "ev-missing", "ev-off"])
        yield started


def _named(page: Page) -> dict[str, str]:
    """Each call of the evidence table and what its row names, in the page's order."""
    rows = page.locator("#call-evidence tbody tr")
    return {
        rows.nth(n).get_attribute("data-call-id") or "": rows.nth(n)
        .locator("td")
        .nth(4)
        .inner_text()
        for n in range(rows.count())
    }


def test_the_rollout_page_names_each_calls_evidence(
    server: ServerProcess, page: Page, tmp_path_factory: pytest.TempPathFactory
) -> None:
    page.goto(f"{server.base_url}/ui/rollouts/ev-missing")
    shots = screenshots_dir(tmp_path_factory.mktemp("screenshots"))
    page.locator("#evidence-heading").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "call-evidence.png"), full_page=True)
    expect(page.locator("#evidence-coverage")).to_contain_text(
        "3 admitted, 2 captured, 1 missing, 0 pending, 1 captures without a lineage row"
    )
    named = _named(page)
    # The named calls come first.
    assert list(named)[:2] == ["m-2", "m-stray"]
    assert named == {
        "m-2": "capture missing",
        "m-stray": "lineage row missing",
        "m-1": "complete",
        "m-3": "complete",
    }
    row = page.locator('#call-evidence tr[data-call-id="m-2"] td')
    assert row.nth(1).inner_text().endswith("failure")
    assert row.nth(2).inner_text().startswith("#")
    assert row.nth(3).inner_text() == "–"

    page.goto(f"{server.base_url}/ui/rollouts/ev-pending")
    assert _named(page) == {"p-2": "capture pending", "p-1": "complete"}
    page.goto(f"{server.base_url}/ui/rollouts/ev-off")
    expect(page.locator("#evidence-coverage")).to_contain_text("Nothing was captured")
    assert set(_named(page).values()) == {"capture missing"}
    page.goto(f"{server.base_url}/ui/rollouts/ev-proxy")
    assert _named(page) == {"x-1": "nothing named"}


def test_the_overview_filters_rollouts_with_missing_evidence(
    server: ServerProcess, page: Page
) -> None:
    page.goto(f"{server.base_url}/ui/")
    assert rollout_ids(page) == ["ev-complete", "ev-missing", "ev-off", "ev-pending", "ev-proxy"]
    page.select_option('select[name="evidence"]', "missing")
    follow(page, 'form.filters button[type="submit"]')
    assert rollout_ids(page) == ["ev-missing", "ev-off"]
    expect(page.locator('select[name="evidence"]')).to_have_value("missing")
    page.goto(f"{server.base_url}/ui/?evidence=pending")
    assert rollout_ids(page) == ["ev-pending"]
    page.goto(f"{server.base_url}/ui/?evidence=missing&state=live")
    assert rollout_ids(page) == []


def test_a_bad_evidence_filter_is_a_400(server: ServerProcess) -> None:
    reply = httpx.get(f"{server.base_url}/ui/?evidence=everything")
    assert reply.status_code == 400
    assert "evidence: expected missing or pending" in reply.text
