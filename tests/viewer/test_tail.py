"""The live tail's page over HTTP, in-process, on both backends: a capture's status in words (a
429 does not read like a 200), the filters by rollout and kind, a 4xx for bad filters, and the
tail's freshness: it shows the log as far as the views have projected it."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from ledger.app.config import Settings
from ledger.areas.viewer import routes
from tests.api.support import ledger_of, running_app
from tests.support import viewer_data as data


@pytest.fixture
async def tail(client: httpx.AsyncClient) -> httpx.AsyncClient:
    calls: dict[str, dict[str, Any]] = {
        "tl-ok": {},
        "tl-429": {"status_code": 429, "error_category": "rate_limited"},
        "tl-cut": {"finish_reason": "length"},
    }
    for n, (rollout_id, options) in enumerate(calls.items()):
        body = data.exchange(f"{rollout_id}-m", data.T0 + n, data.T0 + n + 1, **options)
        (await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body)).raise_for_status()
    pending = {"model_call_id": "tl-late"}
    reply = await client.post("/v1/rollouts/tl-ok/model-calls/pending", json=pending)
    reply.raise_for_status()
    return client


def _rows(text: str) -> list[tuple[str, str, str]]:
    """(kind, status cell, rollout) of each row, newest first."""
    body = text[text.index('<table id="tail"') :]
    return [
        (kind, status, rollout)
        for kind, status, rollout in re.findall(
            r'<tr data-seq="\d+">.*?<td>\d{4}-[^<]*</td><td>([^<]*)</td>'
            r'<td data-col="status">(.*?)</td><td class="id">(?:<a [^>]*>)?([^<]*)',
            body,
        )
    ]


async def test_the_tail_shows_each_capture_status_in_words(tail: httpx.AsyncClient) -> None:
    text = (await tail.get("/ui/events")).text
    assert _rows(text) == [
        ("capture.pending_announced", "", "tl-ok"),
        ("model_call.captured", '<span class="tag truncated">◩ truncated 200</span>', "tl-cut"),
        (
            "model_call.captured",
            '<span class="tag failed">✕ failed 429 (rate_limited)</span>',
            "tl-429",
        ),
        ("model_call.captured", '<span class="ok">200</span>', "tl-ok"),
    ]
    assert '<th scope="col">Capture status</th>' in text


async def test_the_tail_filters_by_rollout_and_kind(tail: httpx.AsyncClient) -> None:
    by_rollout = (await tail.get("/ui/events?rollout=tl-ok")).text
    assert [(k, r) for k, _, r in _rows(by_rollout)] == [
        ("capture.pending_announced", "tl-ok"),
        ("model_call.captured", "tl-ok"),
    ]
    assert "Showing the newest events of rollout tl-ok up to seq" in by_rollout
    assert 'data-stream="/ui/events/stream?rollout=tl-ok"' in by_rollout
    by_kind = (await tail.get("/ui/events?kind=model_call.captured")).text
    assert [r for _, _, r in _rows(by_kind)] == ["tl-cut", "tl-429", "tl-ok"]
    assert '<option value="model_call.captured" selected>' in by_kind
    both = (await tail.get("/ui/events?rollout=tl-ok&kind=capture.pending_announced")).text
    assert [(k, r) for k, _, r in _rows(both)] == [("capture.pending_announced", "tl-ok")]
    assert 'data-stream="/ui/events/stream?rollout=tl-ok&amp;kind=capture.pending_announced"' in (
        both
    )


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ("?kind=nope", 400, "kind: &#x27;nope&#x27; is not an event kind of this ledger"),
        ("?rollout=%3Cb%3E", 400, "rollout: not a rollout id: &#x27;&lt;b&gt;&#x27;"),
        ("?rollout=tl-ok&rollout=tl-429", 400, "rollout: given 2 times; the tail takes one"),
        ("?kind=a&kind=b", 400, "kind: given 2 times"),
        ("?rollout=no-such", 404, "rollout: no rollout &#x27;no-such&#x27; in this ledger."),
    ],
)
async def test_bad_tail_filters_are_a_clear_4xx(
    tail: httpx.AsyncClient, query: str, status: int, says: str
) -> None:
    reply = await tail.get("/ui/events" + query)
    assert reply.status_code == status
    assert says in reply.text


async def test_the_stream_refuses_bad_filters(tail: httpx.AsyncClient) -> None:
    reply = await tail.get("/ui/events/stream?kind=nope")
    assert reply.status_code == 400
    assert reply.text == "kind: 'nope' is not an event kind of this ledger"
    many = await tail.get("/ui/events/stream?rollout=a&rollout=b")
    assert many.status_code == 400 and "rollout: given 2 times" in many.text


async def test_the_stream_starts_after_a_seq_or_the_head(tail: httpx.AsyncClient) -> None:
    for after in ("heads", "-1", "1e3", "%C2%B2"):
        reply = await tail.get(f"/ui/events/stream?after={after}")
        assert reply.status_code == 400
        assert reply.text == "after: expected a seq or head"


def _sent(stream_text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in stream_text.splitlines() if line.startswith("data: ")]


async def test_the_tail_waits_for_the_views_so_each_capture_has_its_status(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture's status is its projected row: the tail never sends an event the views have not
    reached, since a row sent without its status would never be sent again."""
    monkeypatch.setattr(routes, "STREAM_LIFETIME_SECONDS", 0.5)
    async with running_app(settings) as (app, http):
        ledger = ledger_of(app)
        assert ledger.projector is not None
        first = data.exchange("tw-0", data.T0, data.T0 + 1)
        posted = await http.post("/v1/rollouts/tw/model-calls", json=first)
        seen = posted.json()["seq"]
        await ledger.freshness.wait_for_seq(seen)
        await ledger.projector.stop()
        late = data.exchange("tw-1", data.T0 + 2, data.T0 + 3, status_code=429)
        late["error_category"] = "rate_limited"
        posted = await http.post("/v1/rollouts/tw/model-calls", json=late)
        behind = posted.json()["seq"]
        assert behind > seen

        page = (await http.get("/ui/events?rollout=tw")).text
        assert [status for _, status, _ in _rows(page)] == ['<span class="ok">200</span>']
        assert f"up to seq {seen}." in page and f'data-after="{seen}"' in page
        held = await http.get(f"/ui/events/stream?after={seen}&rollout=tw")
        assert held.status_code == 200 and _sent(held.text) == []
        from_head = await http.get("/ui/events/stream?after=head")
        assert _sent(from_head.text) == []

        await ledger.projector.start()
        await ledger.freshness.wait_for_seq(behind)
        sent = _sent((await http.get(f"/ui/events/stream?after={seen}&rollout=tw")).text)
        assert [(e["seq"], e["status"]) for e in sent] == [
            (behind, {"text": "failed 429 (rate_limited)", "failed": True, "truncated": False})
        ]
