"""Triage in a real browser (headless Chromium) against a real ``ledger serve``: the overview's
health table and check filter, failures one can see on the timeline (never colour alone,
never a sliver), findings linked to their calls, the skip link past the timeline, and the
calls table at 390 px. A run of its own, so the other browser tests' counts hold."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from ledger.areas.viewer.health_words import ROLLOUT_CHECKS
from ledger.areas.viewer.timeline import MIN_BAR
from tests.support import viewer_data as data
from tests.support.databases import sqlite_url
from tests.support.health_run import generate_run, interleaved_posts
from tests.support.server import ServerProcess
from tests.viewer.browser import require_chromium
from tests.viewer.test_browser import upgrade

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SLIVER = "sliver-0"  # an hour-long call, then a 429 of two milliseconds that ends the rollout
LONG = "long-0"  # 105 calls; the last one fails, so its finding is about a call on page 2
LONG_CALLS = 105


def _write_sliver(http: httpx.Client) -> None:
    calls = [
        data.exchange("s0", data.T0, data.T0 + 3600.0),
        data.exchange(
            "s1",
            data.T0 + 3600.0,
            data.T0 + 3600.002,
            status_code=429,
            error_category="rate_limited",
        ),
    ]
    for body in calls:
        http.post(f"/v1/rollouts/{SLIVER}/model-calls", json=body).raise_for_status()
    _own(http, SLIVER, ["s0", "s1"])


def _write_long(http: httpx.Client) -> None:
    ids = [f"l{i:03d}" for i in range(LONG_CALLS)]
    for i, call_id in enumerate(ids):
        failed = i == LONG_CALLS - 1
        body = data.exchange(
            call_id,
            data.T0 + i,
            data.T0 + i + 0.5,
            status_code=503 if failed else 200,
            error_category="upstream_5xx" if failed else None,
        )
        http.post(f"/v1/rollouts/{LONG}/model-calls", json=body).raise_for_status()
    _own(http, LONG, ids)


def _own(http: httpx.Client, rollout_id: str, call_ids: list[str]) -> None:
    invocation = {
        "kind": "agent_invocation",
        "invocation_id": "root",
        "status": "completed",
        "model_calls": [{"model_call_id": c} for c in call_ids],
    }
    bundle = {"source": "test", "records": [invocation], "gaps": []}
    http.post(f"/v1/rollouts/{rollout_id}/observations", json=bundle).raise_for_status()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    require_chromium()
    root = tmp_path_factory.mktemp("triage")
    url = sqlite_url(root)
    upgrade(url)
    (root / "data").mkdir()
    with ServerProcess(data_dir=root / "data", database_url=url) as started:
        with httpx.Client(base_url=started.base_url, timeout=60) as http:
            for path, body in interleaved_posts(generate_run(24, seed=4), seed=3):
                http.post(path, json=body).raise_for_status()
            data.write_rich(http, data.RichRollout())
            _write_sliver(http)
            _write_long(http)
        started.wait_for_views()
        yield started


def _tab_to(page: Page, selector: str, limit: int = 300) -> None:
    """Press Tab until the focused element matches ``selector`` (keyboard reach)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("s => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


def _v1(server: ServerProcess, path: str) -> Any:
    with httpx.Client(base_url=server.base_url) as http:
        answer = http.get(path)
        answer.raise_for_status()
        media = answer.headers["content-type"]
        return answer.json() if media.startswith("application/json") else answer.text


def test_overview_health_table_agrees_with_v1_health_and_filters_by_check(
    server: ServerProcess, page: Page, shots: Path
) -> None:
    verdicts = _v1(server, "/v1/health")["quality_summary"]["run"]["verdicts"]
    lines = [json.loads(x) for x in _v1(server, "/v1/health/rollout-verdicts").splitlines()]
    failing = Counter(c for line in lines for c in {f["check"] for f in line["findings"]})
    page.goto(f"{server.base_url}/ui/")
    table = page.locator("#health-checks")
    expect(table.locator("caption")).to_contain_text("latest attempt of each rollout")
    checks = table.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.check)")
    assert checks == [c for c in ROLLOUT_CHECKS if c in checks]  # registry order
    for check in checks:
        cell = table.locator(f'tr[data-check="{check}"] td[data-col="failing"]')
        expect(cell).to_have_text(str(failing[check]))
        # The first failing rollouts (by id) are links to them.
        links = table.locator(f'tr[data-check="{check}"] td.examples a')
        first = sorted(
            line["rollout_id"] for line in lines if check in {f["check"] for f in line["findings"]}
        )[:5]
        assert links.evaluate_all("as => as.map(a => a.textContent)") == first
    quality = page.locator('section[aria-label="Quality"]')
    for label, key in (
        ("Healthy (latest attempts)", "healthy"),
        ("Unhealthy (latest attempts)", "unhealthy"),
        ("No findings, some unobserved (latest)", "unobserved"),
    ):
        value = quality.locator(f'dt:text-is("{label}") + dd')
        expect(value).to_have_text(f"{verdicts[key]:,}")
    expect(page.locator("#unobserved-note")).to_have_count(1)
    expect(page.locator("#tasks th", has_text="Unhealthy (latest)")).to_have_count(1)
    table.screenshot(path=str(shots / "health-triage.png"))
    page.set_viewport_size({"width": 1000, "height": 800})
    page.locator("#health-heading").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "overview-health.png"), full_page=False)

    # The check's link, reached by keyboard, filters the overview on it.
    check = "model_call_failed"
    assert failing[check] > 0
    _tab_to(page, f'#health-checks tr[data-check="{check}"] a.check')
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/ui/?check={check}*")
    rows = page.locator("#rollouts tbody tr[data-rollout]")
    assert rows.count() > 0
    named = rows.evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('a.check')].map(a => a.textContent))"
    )
    assert all(check in names for names in named)
    expect(page.locator('select[name="check"]')).to_have_value(check)


def test_failures_are_shapes_not_slivers(server: ServerProcess, page: Page, shots: Path) -> None:
    page.goto(f"{server.base_url}/ui/rollouts/{SLIVER}")
    bars = page.locator("svg.timeline rect.bar")
    found = bars.evaluate_all(
        """rects => rects.map(r => ({index: Number(r.dataset.index), width: r.width.baseVal.value,
            cls: r.getAttribute('class'), fill: getComputedStyle(r).fill,
            stroke: getComputedStyle(r).stroke}))"""
    )
    assert [b["index"] for b in found] == [0, 1]
    # The 2 ms 429 after an hour would be 0.0005 px; it is drawn MIN_BAR wide, hatched.
    assert found[1]["width"] == pytest.approx(MIN_BAR)
    assert "failed" in found[1]["cls"]
    assert found[1]["fill"].startswith("url(") and "hatch-failed" in found[1]["fill"]
    assert not found[0]["fill"].startswith("url(")
    page.locator("svg.timeline").screenshot(path=str(shots / "timeline-sliver.png"))

    page.goto(f"{server.base_url}/ui/rollouts/rich-0")
    truncated = page.locator("svg.timeline rect.bar.truncated")
    assert truncated.evaluate("r => getComputedStyle(r).strokeDasharray") not in ("", "none")
    assert truncated.evaluate("r => getComputedStyle(r).fill") != page.locator(
        "svg.timeline rect.bar.call:not(.failed):not(.truncated)"
    ).first.evaluate("r => getComputedStyle(r).fill")
    legend = page.locator(".legend")
    expect(legend).to_contain_text("failed (hatched)")
    expect(legend).to_contain_text("truncated (dashed outline)")
    widths = page.locator("svg.timeline rect.bar").evaluate_all(
        "rects => rects.map(r => r.width.baseVal.value)"
    )
    assert min(widths) >= MIN_BAR


def test_skip_link_passes_the_timeline(server: ServerProcess, page: Page) -> None:
    page.goto(f"{server.base_url}/ui/rollouts/{LONG}")
    bars = page.locator("svg.timeline a").count()
    assert bars == 100  # a page of calls: a hundred tab stops the skip link saves
    _tab_to(page, "a.skip-past")
    expect(page.locator("a.skip-past")).to_have_text(
        "Skip the timeline (one link per bar) to the model calls"
    )
    page.keyboard.press("Enter")
    page.wait_for_url("**#calls-heading")
    page.keyboard.press("Tab")
    inside_timeline = page.evaluate("() => !!document.activeElement.closest('svg.timeline')")
    assert not inside_timeline
    after_calls = page.evaluate(
        """() => !!(document.getElementById('calls-heading').compareDocumentPosition(
            document.activeElement) & Node.DOCUMENT_POSITION_FOLLOWING)"""
    )
    assert after_calls


def test_each_finding_links_to_its_call(server: ServerProcess, page: Page) -> None:
    last = LONG_CALLS - 1
    page.goto(f"{server.base_url}/ui/rollouts/{LONG}")
    findings = page.locator("#health-findings .finding")
    texts = findings.evaluate_all("fs => fs.map(f => f.dataset.check)")
    # The 503 ended the rollout, failed, and (no usage in an error) has no token counts.
    assert texts == [
        "rollout_ended_on_failed_model_call",
        "model_call_missing_token_counts",
        "model_call_failed",
    ]
    for finding in findings.all():
        link = finding.locator("a.to-call")
        expect(link).to_have_text(f"→ call #{last}")
        assert f"calls_from={last}#call-{last}" in (link.get_attribute("href") or "")
    findings.first.locator("a.to-call").click()
    page.wait_for_url(f"**calls_from={last}#call-{last}")
    row = page.locator(f"#call-{last}")
    expect(row).to_be_visible()
    expect(row.locator('td[data-col="status"]')).to_contain_text("failed 503")
    # On the call's own page the finding links to the row on that page.
    link = page.locator("#health-findings .finding").first.locator("a.to-call")
    assert link.get_attribute("href") == f"#call-{last}"


def test_390px_keeps_status_tokens_and_latency(
    server: ServerProcess, page: Page, shots: Path
) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{server.base_url}/ui/rollouts/rich-0")
    row = page.locator("#call-1")
    for col in ("status", "tokens-in", "tokens-out", "latency"):
        cell = row.locator(f'td[data-col="{col}"]')
        expect(cell).to_be_visible()
        box = cell.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, col
    expect(row.locator('td[data-col="status"]')).to_contain_text("failed 500")
    optional = row.locator("td.opt").first
    expect(optional).to_be_hidden()
    headings = page.locator("#calls thead th").evaluate_all(
        "ths => ths.filter(t => t.offsetParent !== null).map(t => t.textContent)"
    )
    assert headings == ["#", "Status", "Tokens in", "Out", "Latency ms"]
    page.locator("#calls-heading").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "rollout-390.png"), full_page=False)
    # The rest on demand, by keyboard: the checkbox shows every column.
    _tab_to(page, "input.all-columns")
    page.keyboard.press("Space")
    expect(optional).to_be_visible()
    expect(page.locator("#calls thead th", has_text="Model")).to_be_visible()
