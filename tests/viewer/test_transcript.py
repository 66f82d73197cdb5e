"""The transcript page over HTTP, in-process, on both backends: each dialect reads in order,
tool results beside their calls, hostile text inert and bounded, paging, bad input."""

from __future__ import annotations

import re

import httpx
import pytest

from ledger.areas.viewer.rollout_query import CALLS_PER_PAGE
from ledger.areas.viewer.transcript import (
    Part,
    attach_results,
    item_message,
    output_messages,
)
from tests.support import viewer_data as data

# What each dialogue must show, in this order (escaped as the page writes it).
EXPECTED = {
    "talk-chat": [
        'id="turn-0"',
        "You are terse.",
        "What is in the file?",
        "Image · image/png",
        "I should read the file first.",
        "<code>read_file</code>",
        "&quot;path&quot;: &quot;a.txt&quot;,\n  &quot;lines&quot;: 3",
        'data-result-of="call_read"',
        "&lt;script&gt;window.__pwned = 2&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=",
        "invoice_⟦U+202E⟧gnp.exe",
        'id="turn-1"',
        "The file holds markup and a renamed exe.",
    ],
    "talk-responses": [
        'id="turn-0"',
        "Be brief.",
        "List the directory.",
        "Use ls.",
        "<code>shell</code>",
        "&quot;cmd&quot;: &quot;ls&quot;",
        'data-result-of="fc_ls"',
        "Long text · 1,000,0",
        'id="turn-1"',
        "Two files.",
    ],
    "talk-messages": [
        'id="turn-0"',
        "You run tests.",
        "Run the tests.",
        "pytest it is.",
        "<code>bash</code>",
        "&quot;cmd&quot;: &quot;pytest -q&quot;",
        'data-result-of="tu_1"',
        '<span class="tag failed">error</span>',
        "&lt;script&gt;window.__pwned = 2&lt;/script&gt;",
        'id="turn-1"',
        "One test failed.",
    ],
}


@pytest.fixture
async def talks(client: httpx.AsyncClient) -> httpx.AsyncClient:
    for rollout_id, dialogue in data.DIALOGUES.items():
        for body in dialogue(rollout_id):
            reply = await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body)
            reply.raise_for_status()
    return client


def _in_order(text: str, expected: list[str]) -> None:
    at = 0
    for needle in expected:
        found = text.find(needle, at)
        assert found >= 0, f"{needle!r} missing after position {at}"
        at = found + len(needle)


@pytest.mark.parametrize("rollout_id", sorted(data.DIALOGUES))
async def test_each_dialect_reads_in_order_with_results_beside_their_calls(
    talks: httpx.AsyncClient, rollout_id: str
) -> None:
    reply = await talks.get(f"/ui/rollouts/{rollout_id}/transcript")
    assert reply.status_code == 200
    text = reply.text
    _in_order(text, EXPECTED[rollout_id])
    # The second request repeats the first exchange: shown once, the echo not again.
    question = EXPECTED[rollout_id][2]
    assert text.count(question) == 1
    # The tool result is inside the tool call's box, in the turn of the call that asked.
    call_box = text.index('class="tool-call"')
    assert call_box < text.index("data-result-of=") < text.index('id="turn-1"')
    # Each turn links to its call row and says its tokens and latency.
    assert f'href="/ui/rollouts/{rollout_id}#call-1">Call #1</a>' in text
    assert re.search(r'data-meta="latency">1,500 ms<', text)
    assert re.search(r'data-meta="tokens">\d[\d,]* in · \d+ out', text)
    # Reasoning is collapsed: a closed <details>.
    assert '<details class="reasoning"><summary>Reasoning' in text
    assert "<details open" not in text


async def test_hostile_text_renders_inert_and_a_long_line_is_cut(
    talks: httpx.AsyncClient,
) -> None:
    for rollout_id in data.DIALOGUES:
        text = (await talks.get(f"/ui/rollouts/{rollout_id}/transcript")).text
        assert "<script>window" not in text
        assert 'onerror="window' not in text
        assert "\u202e" not in text
    responses = await talks.get("/ui/rollouts/talk-responses/transcript")
    # The million-character line is folded with its size and cut: the page stays small.
    assert len(responses.content) < 100_000
    assert "Cut at 20,000 characters" in responses.text
    assert "1,000,0" in responses.text


async def test_the_transcript_pages_like_the_calls_and_rejects_bad_input(
    client: httpx.AsyncClient,
) -> None:
    count = CALLS_PER_PAGE + 5
    messages: list[dict[str, object]] = []
    for i in range(count):
        messages.append({"role": "user", "content": f"question {i}"})
        body = data.exchange(f"long-{i}", data.T0 + i, data.T0 + i + 0.5, text=f"answer {i}")
        body["request"] = {"model": "m-chat", "messages": list(messages)}
        (await client.post("/v1/rollouts/long/model-calls", json=body)).raise_for_status()
        messages.append({"role": "assistant", "content": f"answer {i}"})
    first = (await client.get("/ui/rollouts/long/transcript")).text
    assert first.count('<section class="turn') == CALLS_PER_PAGE
    # Every question once, in order, each in its own turn (the history is not repeated).
    _in_order(first, [f"question {i}<" for i in range(CALLS_PER_PAGE)])
    assert first.count("question 7<") == 1
    found = re.search(r'<a href="([^"]+)" data-pager="turns-next">', first)
    assert found is not None
    second = await _text(client, found.group(1).replace("&amp;", "&"))
    # The next page starts where the first ended: its first turn adds one question only.
    assert second.count('<section class="turn') == 5
    _in_order(second, [f"question {i}<" for i in range(CALLS_PER_PAGE, count)])
    assert "question 0<" not in second
    assert (await client.get("/ui/rollouts/nope/transcript")).status_code == 404
    bad = await client.get("/ui/rollouts/long/transcript?calls_from=x")
    assert bad.status_code == 400 and "calls_from: expected a call index" in bad.text


async def _text(client: httpx.AsyncClient, url: str) -> str:
    reply = await client.get(url)
    assert reply.status_code == 200, url
    return reply.text


def test_results_attach_to_the_call_they_answer_and_strays_stay() -> None:
    outputs = output_messages(
        "responses",
        {"output": [{"type": "function_call", "call_id": "a", "name": "f", "arguments": "{"}]},
    )
    results = [
        item_message("responses", {"type": "function_call_output", "call_id": "a", "output": "1"}),
        item_message("responses", {"type": "function_call_output", "call_id": "z", "output": "2"}),
    ]
    attached = attach_results([outputs, results])
    call = attached[0][0].parts[0]
    assert call.kind == "tool_call" and call.text == "{"  # unparseable arguments as they are
    assert call.result == Part("tool_result", "1", call_id="a")
    assert [p.call_id for m in attached[1] for p in m.parts] == ["z"]
