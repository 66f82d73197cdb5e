"""The compare page over HTTP, in-process, on both backends: two rollouts side by side with the
first point where their transcripts differ, all rollouts of a task, the links from a rollout's
page, and a 4xx (never a 500) for every bad parameter."""

from __future__ import annotations

import re

import httpx
import pytest

from ledger.areas.viewer.compare_query import COMPARE_SCAN
from tests.support import compare_data as cmp
from tests.support import viewer_data as data


@pytest.fixture
async def run(client: httpx.AsyncClient) -> httpx.AsyncClient:
    for path, body in cmp.compare_posts():
        (await client.post(path, json=body)).raise_for_status()
    return client


def _in_order(text: str, expected: list[str]) -> None:
    at = 0
    for needle in expected:
        found = text.find(needle, at)
        assert found >= 0, f"{needle!r} missing after position {at}"
        at = found + len(needle)


def _fact(text: str, name: str) -> list[str]:
    found = re.search(rf'<tr data-fact="{name}"[^>]*>(.*?)</tr>', text, re.S)
    assert found is not None, name
    return re.findall(r"<td>(.*?)</td>", found.group(1), re.S)


async def test_two_rollouts_side_by_side_with_their_first_difference(
    run: httpx.AsyncClient,
) -> None:
    reply = await run.get("/ui/compare?a=cmp-0&b=cmp-1")
    assert reply.status_code == 200
    text = reply.text
    assert _fact(text, "Task") == [cmp.TASK, cmp.TASK, ""]
    assert _fact(text, "Resolved") == ["yes", "no", '<span class="tag differs">differs</span>']
    assert _fact(text, "Calls")[:2] == ["2", "2"]
    # The tool call ids differ; the transcripts first differ at the reply after the result.
    assert "The transcripts first differ at <strong>call #1, message 2 of the turn</strong>." in (
        text
    )
    assert "They agree on calls #0 to #0." in text
    _in_order(
        text,
        [
            'data-side="A" aria-label="Call 1 of A"',
            'data-role="tool"',
            "data-first-difference",
            "Patched: f returns 2.",
            'data-side="B" aria-label="Call 1 of B"',
            'data-role="tool"',
            "data-first-difference",
            "I give up.",
            'id="compare-calls"',
            'data-call="0"',
            "same",
            'data-call="1"',
            "first difference",
        ],
    )
    # The tool result's markup is text.
    assert "&lt;script&gt;window.__pwned = 4&lt;/script&gt;" in text
    assert "<script>window" not in text
    # Both ids can be copied (a read-only field; the button for script).
    assert 'value="cmp-0" aria-label="rollout id A"' in text
    assert 'data-copy="cmp-1"' in text


async def test_a_failed_call_differs_from_a_reply_and_identical_transcripts_say_so(
    run: httpx.AsyncClient,
) -> None:
    failed = (await run.get("/ui/compare?a=cmp-0&b=cmp-2")).text
    assert "first differ at <strong>call #0, message 3 of the turn</strong>" in failed
    _in_order(failed, ['data-side="B"', "data-first-difference", "The call failed: 429."])
    assert _fact(failed, "Failed calls")[:2] == ["0", "1"]
    same = (await run.get("/ui/compare?a=cmp-0&b=cmp-3")).text
    assert "No difference: the transcripts are the same from call #0 to their end (#1)." in same
    longer = (await run.get("/ui/compare?a=cmp-0&b=cmp-0-a1")).text
    assert "first differ at <strong>call #2: rollout A has no such call</strong>" in longer
    _in_order(longer, ['data-side="A"', "no call here", 'data-side="B"', "All green."])


async def test_all_rollouts_of_a_task_and_the_links_between_attempts(
    run: httpx.AsyncClient,
) -> None:
    text = (await run.get("/ui/compare", params={"task": cmp.TASK})).text
    rows = re.findall(r'<tr data-rollout="([^"]+)">', text)
    assert rows == ["cmp-0", "cmp-0-a1", "cmp-1", "cmp-2", "cmp-3"]
    differences = re.findall(r'<td data-col="difference">(.*?)</td>', text)
    assert differences == [
        "(the reference)",
        "call #2: rollout A has no such call",
        "call #1, message 2 of the turn",
        "call #0, message 3 of the turn",
        "none: the same transcript",
    ]
    assert "5 rollouts shown (every attempt), 3 resolved." in text
    assert 'href="/ui/compare?a=cmp-0&amp;b=cmp-2">Compare with cmp-0</a>' in text
    page = (await run.get("/ui/rollouts/cmp-1")).text
    _in_order(
        page,
        [
            'id="attempts"',
            "All rollouts of the task side by side",
            'href="/ui/rollouts/cmp-0"',
            'href="/ui/compare?a=cmp-1&amp;b=cmp-0"',
            'href="/ui/rollouts/cmp-0-a1"',
            'href="/ui/rollouts/cmp-2"',
            'href="/ui/rollouts/cmp-3"',
        ],
    )
    assert 'href="/ui/compare?a=cmp-1&amp;b=cmp-1"' not in page


async def test_retries_without_a_reported_task_link_to_each_other(
    client: httpx.AsyncClient,
) -> None:
    # Without a result the task is the logical id (Gym's rule): a rollout and its retries.
    for rollout_id in ("r7", "r7-a1", "r7-a2", "r70", "r7-ab"):
        body = data.exchange(f"{rollout_id}-m", data.T0, data.T0 + 1)
        (await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body)).raise_for_status()
    page = (await client.get("/ui/rollouts/r7-a1")).text
    section = page[page.index('id="attempts"') :]
    assert "Other rollouts of this task" in section
    assert re.findall(r'<li><a href="/ui/rollouts/([^"]+)">', section) == ["r7", "r7-a2"]


async def test_a_long_pair_is_compared_one_window_at_a_time(client: httpx.AsyncClient) -> None:
    count = COMPARE_SCAN + 5
    for rollout_id in ("long-a", "long-b"):
        messages: list[dict[str, object]] = []
        for i in range(count):
            messages.append({"role": "user", "content": f"question {i}"})
            answer = f"answer {i}" if (rollout_id, i) != ("long-b", count - 1) else "other"
            body = data.exchange(f"{rollout_id}-{i}", data.T0 + i, data.T0 + i + 0.5, text=answer)
            body["request"] = {"model": "m-chat", "messages": list(messages)}
            reply = await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body)
            reply.raise_for_status()
            messages.append({"role": "assistant", "content": answer})
    first = (await client.get("/ui/compare?a=long-a&b=long-b")).text
    assert f"No difference in calls #0 to #{COMPARE_SCAN - 1} (one page compares" in first
    assert first.count('<tr data-call="') == count  # the calls table shows up to 100
    found = re.search(r'<a href="([^"]+)" data-pager="compare-further">', first)
    assert found is not None
    further = (await client.get(found.group(1).replace("&amp;", "&"))).text
    assert f"first differ at <strong>call #{count - 1}, message 2 of the turn</strong>" in further
    assert f"They agree on calls #{COMPARE_SCAN} to #{count - 2}." in further
    assert further.count('<tr data-call="') == count - COMPARE_SCAN


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ("?a=cmp-0", 400, "b: missing"),
        ("?b=cmp-0", 400, "a: missing"),
        ("?a=cmp-0&b=cmp-1&a=cmp-2", 400, "a: given 2 times; too many ids"),
        ("?a=cmp-0&b=cmp-1&b=cmp-2&b=cmp-3", 400, "b: given 3 times; too many ids"),
        ("?a=cmp-0&b=cmp-0", 400, "b: the same rollout as a"),
        ("?a=%3Cscript%3E&b=cmp-0", 400, "a: not a rollout id: &#x27;&lt;script&gt;&#x27;"),
        ("?a=" + "x" * 201 + "&b=cmp-0", 400, "a: not a rollout id"),
        ("?a=cmp-0&b=cmp-1&task=t", 400, "task: give either a and b, or a task"),
        ("?task=a%00b", 400, "task: expected a task id"),
        ("?task=" + "t" * 501, 400, "task: expected a task id (at most 500"),
        ("?a=cmp-0&b=cmp-1&calls_from=-1", 400, "calls_from: expected a call index"),
        ("?a=cmp-0&b=cmp-1&calls_from=1&calls_from=2", 400, "calls_from: given 2 times; give"),
        ("?a=cmp-0&b=cmp-1&calls_from=99999999999", 400, "calls_from: expected a call index"),
        ("?a=cmp-0&b=nope", 404, "b: no rollout &#x27;nope&#x27; in this ledger."),
        ("?a=nope&b=cmp-0", 404, "a: no rollout &#x27;nope&#x27; in this ledger."),
        ("?task=no-such-task", 404, "No rollout reported the task &#x27;no-such-task&#x27;."),
    ],
)
async def test_bad_parameters_are_a_clear_4xx(
    run: httpx.AsyncClient, query: str, status: int, says: str
) -> None:
    reply = await run.get("/ui/compare" + query)
    assert reply.status_code == status
    assert says in reply.text
    assert 'role="alert"' in reply.text
    assert len(reply.content) < 20_000


async def test_without_parameters_the_page_is_a_form(run: httpx.AsyncClient) -> None:
    reply = await run.get("/ui/compare")
    assert reply.status_code == 200
    assert '<form class="filters" method="get" action="/ui/compare" id="compare-form">' in (
        reply.text
    )
    beyond = (await run.get("/ui/compare?a=cmp-0&b=cmp-1&calls_from=50")).text
    assert "No difference: the transcripts are the same from call #50: neither has a call" in beyond
