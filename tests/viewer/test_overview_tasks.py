"""The overview's per-task reading, in-process on both backends: natural id order across
keyset pages, task / resolved filters, the attempt and wall-clock columns, the tasks table."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support import viewer_data as data

DJANGO = "swe-verified/django__django-11099"
FLASK = "swe/flask_1"
# Gym's ids: <task index>-<rollout index>[-a<attempt>]; 0-2 and 1-3 were retried.
IDS = (
    [f"0-{r}" for r in range(12)]
    + ["0-2-a1"]
    + [f"1-{r}" for r in range(12)]
    + ["1-3-a1", "1-3-a2"]
)
NATURAL = (
    ["0-0", "0-1", "0-2", "0-2-a1", *(f"0-{r}" for r in range(3, 12))]
    + ["1-0", "1-1", "1-2", "1-3", "1-3-a1", "1-3-a2"]
    + [f"1-{r}" for r in range(4, 12)]
)


def _resolved(rollout_id: str) -> bool:
    # Task 0: even rollouts resolved, the retry of 0-2 not; task 1: only the last retry.
    if rollout_id.startswith("0-"):
        return rollout_id != "0-2-a1" and int(rollout_id.split("-")[1]) % 2 == 0
    return rollout_id == "1-3-a2"


@pytest.fixture
async def tasks(client: httpx.AsyncClient) -> httpx.AsyncClient:
    for n, rollout_id in enumerate(IDS):
        # Two calls 2 s apart: the wall clock is 2 s + the second call (n % 5 + 1) s.
        for k, (start, end) in enumerate([(0.0, 1.0), (2.0, 3.0 + n % 5)]):
            body = data.exchange(f"{rollout_id}-{k}", data.T0 + start, data.T0 + end)
            reply = await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body)
            reply.raise_for_status()
        task = DJANGO if rollout_id.startswith("0-") else FLASK
        result = {"task_id": task, "resolved": _resolved(rollout_id)}
        (await client.post(f"/v1/rollouts/{rollout_id}/result", json=result)).raise_for_status()
    return client


def _ids(text: str) -> list[str]:
    return re.findall(r'<tr data-rollout="([^"]+)"', text)


async def _walk(client: httpx.AsyncClient, url: str) -> list[str]:
    seen: list[str] = []
    next_url: str | None = url
    while next_url is not None:
        reply = await client.get(next_url)
        assert reply.status_code == 200, reply.text
        seen.extend(_ids(reply.text))
        found = re.search(r'<a href="([^"]+)" rel="next">', reply.text)
        next_url = None if found is None else found.group(1).replace("&amp;", "&")
    return seen


async def test_ids_sort_by_task_and_rollout_numbers_across_pages(
    tasks: httpx.AsyncClient,
) -> None:
    assert await _walk(tasks, "/ui/?sort=natural&limit=25") == NATURAL
    assert await _walk(tasks, "/ui/?sort=natural&dir=desc&limit=25") == NATURAL[::-1]
    # The Rollout heading sorts that way.
    page = (await tasks.get("/ui/")).text
    assert '<a href="/ui/?sort=natural&amp;dir=asc">Rollout</a>' in page


async def test_task_and_resolved_filters(tasks: httpx.AsyncClient) -> None:
    exact = _ids((await tasks.get(f"/ui/?task={FLASK}&sort=natural")).text)
    assert exact == [r for r in NATURAL if r.startswith("1-")]
    assert _ids((await tasks.get("/ui/?task=swe")).text) == []
    part = _ids((await tasks.get("/ui/?task_has=django__django&sort=natural")).text)
    assert part == [r for r in NATURAL if r.startswith("0-")]
    # % and _ are literal in "contains": "flask_1" matches, "flask%" does not.
    assert len(_ids((await tasks.get("/ui/?task_has=flask_1")).text)) == 14
    assert _ids((await tasks.get("/ui/?task_has=flask%25")).text) == []
    resolved = _ids((await tasks.get("/ui/?resolved=yes&sort=natural")).text)
    assert resolved == [r for r in NATURAL if _resolved(r)]
    assert _ids((await tasks.get("/ui/?resolved=unknown")).text) == []
    bad = await tasks.get("/ui/?resolved=maybe")
    assert bad.status_code == 400 and "resolved: expected yes, no or unknown" in bad.text
    bad = await tasks.get("/ui/?task=a%01b")
    assert bad.status_code == 400 and "task: expected printable text" in bad.text


async def test_rows_show_task_attempt_resolved_and_wall_clock(tasks: httpx.AsyncClient) -> None:
    page = (await tasks.get("/ui/?id=0-2*")).text
    rows = dict(re.findall(r'<tr data-rollout="([^"]+)">(.*?)</tr>', page))
    assert f'data-col="task" title="{DJANGO}">{DJANGO}<' in rows["0-2-a1"]
    assert 'data-col="attempt">1<' in rows["0-2-a1"]
    assert 'data-col="attempt">0<' in rows["0-2"]
    assert "✕ no" in rows["0-2-a1"] and "✓ yes" in rows["0-2"]
    n = IDS.index("0-2-a1")
    assert f'data-col="duration">{3.0 + n % 5:.1f}<' in rows["0-2-a1"]
    assert "selected rollouts (every attempt is a rollout)" in page


async def test_the_tasks_table_counts_attempts_and_latest_attempts(
    tasks: httpx.AsyncClient,
) -> None:
    page = (await tasks.get("/ui/")).text
    table = page[
        page.index('<table id="tasks">') : page.index("</table>", page.index('id="tasks"'))
    ]
    rows = dict(re.findall(r'<tr data-task="([^"]+)">(.*?)</tr>', table))
    cells = {task: re.findall(r'<td class="num">([^<]*)</td>', row) for task, row in rows.items()}
    # Task 0: 13 rollouts, 12 latest attempts; of those 0-0, 0-4, 0-6, 0-8, 0-10 resolved
    # (0-2's latest attempt, 0-2-a1, is not).
    assert cells[DJANGO][:3] == ["13", "12", "5 of 12 (42%)"]
    # Task 1: 14 rollouts, 12 latest; only 1-3-a2 resolved.
    assert cells[FLASK][:3] == ["14", "12", "1 of 12 (8%)"]
    assert cells[FLASK][3] == f"{14 * 2 * (100 + 20):,}"  # in + out of every attempt's two calls
    latest_durations = sorted(
        3.0 + IDS.index(r) % 5 for r in IDS if r.startswith("1-") and r not in ("1-3", "1-3-a1")
    )
    assert cells[FLASK][4] == f"{latest_durations[6]:.1f}"
    assert "Rollouts (all attempts)" in page
