"""The overview's health triage, in-process on both backends, over a generated run that sets
off every check the ledger's records can express: the run-level table and the latest-attempt
verdict counts equal ``/v1/health``'s; each row names its failing checks; the check filter
gives exactly the rollouts with a finding of that check; the tasks table's unhealthy column;
bad input is a 400."""

from __future__ import annotations

import json
import re
from collections import Counter

import httpx
import pytest

from ledger.areas.viewer.health_words import ROLLOUT_CHECKS
from ledger.gym.health.catalogue import ROLLOUT_CHECKS as GYM_ROLLOUT_CHECKS
from tests.health.support import write_run
from tests.support.health_run import RAISING_CHECK, generate_run

RUN = 60


def _health_rows(text: str) -> dict[str, tuple[int, int]]:
    table = text[text.index('<table id="health-checks">') :]
    table = table[: table.index("</table>")]
    rows = re.findall(
        r'<tr data-check="([^"]+)">.*?data-col="failing">([\d,]+)<.*?'
        r'data-col="unobserved">([\d,]+)<',
        table,
    )
    return {check: (int(a.replace(",", "")), int(b.replace(",", ""))) for check, a, b in rows}


def _card(text: str, label: str) -> int:
    found = re.search(rf"<dt>{re.escape(label)}</dt><dd>([\d,]+)</dd>", text)
    assert found is not None, label
    return int(found.group(1).replace(",", ""))


def _row_checks(text: str) -> dict[str, list[str]]:
    rows = re.findall(r'<tr data-rollout="([^"]+)">(.*?)</tr>', text)
    return {
        rollout_id: re.findall(r'<a class="check" href="[^"]*" title="[^"]*">([a-z_]+)</a>', row)
        for rollout_id, row in rows
    }


def test_the_viewer_names_gyms_rollout_checks() -> None:
    assert ROLLOUT_CHECKS == GYM_ROLLOUT_CHECKS


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_run_level_table_agrees_with_v1_health(client: httpx.AsyncClient) -> None:
    await write_run(client, generate_run(RUN, seed=4))
    page = await client.get("/ui/")
    assert page.status_code == 200, page.text
    health = (await client.get("/v1/health")).json()
    lines = [
        json.loads(line)
        for line in (await client.get("/v1/health/rollout-verdicts")).text.splitlines()
    ]
    verdicts = health["quality_summary"]["run"]["verdicts"]
    assert _card(page.text, "Healthy (latest attempts)") == verdicts["healthy"]
    assert _card(page.text, "Unhealthy (latest attempts)") == verdicts["unhealthy"]
    assert _card(page.text, "No findings, some unobserved (latest)") == verdicts["unobserved"]
    assert verdicts["healthy"] > 0, "usage in the results lets clean rollouts be healthy"
    failing = Counter(c for line in lines for c in {f["check"] for f in line["findings"]})
    unobserved = Counter(c for line in lines for c in line["unobserved"])
    shown = _health_rows(page.text)
    expected = {
        check: (failing[check], unobserved[check])
        for check in ROLLOUT_CHECKS
        if failing[check] or unobserved[check]
    }
    assert shown == expected
    # Registry order, and the run reaches the duplicate and token-count checks.
    assert list(shown) == [c for c in ROLLOUT_CHECKS if c in shown]
    assert shown["rollout_duplicate_identity"][0] > 0
    assert shown["rollout_token_count_mismatch"][0] > 0
    assert "(latest attempts)" in page.text and "every attempt is a rollout" in page.text
    assert page.text.count('id="unobserved-note"') == 1


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_rows_name_their_checks_and_the_check_filter(client: httpx.AsyncClient) -> None:
    await write_run(client, generate_run(RUN, seed=4))
    page = (await client.get("/ui/?limit=200")).text
    by_row = _row_checks(page)
    for rollout_id in list(by_row)[:80]:
        own = (await client.get(f"/v1/rollouts/{rollout_id}/health")).json()
        if own.get("verdict") is None:
            continue
        expected = [c for c in ROLLOUT_CHECKS if c in {f["check"] for f in own["findings"]}]
        assert by_row[rollout_id] == expected, rollout_id
    check = "model_call_failed"
    wanted = sorted(r for r, checks in by_row.items() if check in checks)
    assert wanted
    got: list[str] = []
    url = f"/ui/?check={check}&limit=25"
    while url:
        answer = await client.get(url)
        assert answer.status_code == 200, answer.text
        got += list(_row_checks(answer.text))
        found = re.search(r'<a href="([^"]+)" rel="next">', answer.text)
        url = found.group(1).replace("&amp;", "&") if found else ""
    assert sorted(got) == wanted
    # The "no findings" verdict is not called a verdict of its own anywhere on the rows.
    assert ">unobserved<" not in page


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_tasks_table_counts_unhealthy_latest_attempts(client: httpx.AsyncClient) -> None:
    await write_run(client, generate_run(RUN, seed=4))
    page = (await client.get("/ui/")).text
    lines = [
        json.loads(line)
        for line in (await client.get("/v1/health/rollout-verdicts")).text.splitlines()
    ]
    by_task = Counter(
        f"task-{line['_ng_task_index']}" for line in lines if line["verdict"] == "unhealthy"
    )
    rows = re.findall(
        r'<tr data-task="([^"]+)">.*?data-col="unhealthy">(?:<a href="[^"]+">)?([\d,]+)', page
    )
    # Rollouts with no result have a task id read from their own id and no _ng_task_index
    # in their verdict line (Gym gives them their position): compared are the reported tasks.
    reported = [(task, count) for task, count in rows if task.startswith("task-")]
    assert len(reported) >= 10
    assert any(int(count) for _, count in reported)
    for task, count in reported:
        assert int(count) == by_task[task], task


async def test_a_bad_check_is_a_400(client: httpx.AsyncClient) -> None:
    answer = await client.get("/ui/?check=" + "x" * 5000)
    assert answer.status_code == 400
    assert "check: expected one of" in answer.text
    assert len(answer.text) < 20_000
