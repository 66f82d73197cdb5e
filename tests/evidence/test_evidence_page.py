"""The bounded read of one rollout's call evidence (what the viewer's rollout page shows), on
both backends: its coverage and findings are the JSON route's, named calls come first in the
order the ledger heard of them, and ``limit`` bounds the calls read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import httpx
import pytest

from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.areas.evidence.findings import Window
from ledger.areas.evidence.page_query import EvidencePage, rollout_evidence_page
from ledger.log.store import LedgerStore
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import failure_row
from tests.support import viewer_data as data

GRACE_S = 3600.0


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A window far longer than the test: a live rollout's uncaptured calls stay pending."""
    application = create_app(settings.model_copy(update={"capture_grace_s": GRACE_S}))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http


async def _write(client: httpx.AsyncClient, rollout_id: str) -> None:
    calls = [f"c{n}" for n in range(7)]
    reply = await client.post(
        f"/v1/rollouts/{rollout_id}/model-calls/intents", json={"model_call_ids": calls}
    )
    reply.raise_for_status()
    for model_call_id in calls:
        row = failure_row(model_call_id)
        (await client.post(f"/v1/rollouts/{rollout_id}/ledger/rows", json=row)).raise_for_status()
    for n, model_call_id in enumerate(["c1", "c3", "c5", "stray"]):
        body = data.exchange(model_call_id, data.T0 + n, data.T0 + n + 1)
        reply = await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body)
        reply.raise_for_status()


async def _page(store: LedgerStore, rollout_id: str, limit: int) -> EvidencePage:
    window = Window(datetime.now(UTC), GRACE_S)
    page = await store.read_sync(
        partial(rollout_evidence_page, rollout_id=rollout_id, window=window, limit=limit)
    )
    assert page is not None
    return page


def _expected_order(document: dict[str, Any]) -> list[str]:
    named = [c["model_call_id"] for c in document["calls"] if c["finding"] is not None]
    rest = [c["model_call_id"] for c in document["calls"] if c["finding"] is None]
    return named + rest


async def _agrees(client: httpx.AsyncClient, store: LedgerStore, rollout_id: str) -> None:
    document = (await client.get(f"/v1/rollouts/{rollout_id}/call-evidence")).json()
    full = await _page(store, rollout_id, 100)
    assert full.coverage.public() == document["coverage"]
    assert full.calls_total == len(document["calls"]) == 8
    assert [c.call.model_call_id for c in full.calls] == _expected_order(document)
    findings = {c["model_call_id"]: c["finding"] for c in document["calls"]}
    assert {c.call.model_call_id: c.finding for c in full.calls} == findings
    short = await _page(store, rollout_id, 3)
    assert short.calls == full.calls[:3]
    assert short.coverage == full.coverage and short.calls_total == 8


async def test_the_bounded_read_agrees_with_the_call_evidence_route(
    client: httpx.AsyncClient, store: LedgerStore
) -> None:
    await _write(client, "r1")
    await _agrees(client, store, "r1")
    live = await _page(store, "r1", 100)
    assert (live.coverage.pending, live.coverage.missing) == (4, 0)
    assert live.coverage.captures_without_row == 1
    reply = await client.post(
        "/training-token-capture/control/rollouts/retire",
        json={"rollout_ids": ["r1"]},
        headers=CONTROL_HEADERS,
    )
    assert reply.status_code == 200, reply.text
    await _agrees(client, store, "r1")
    retired = await _page(store, "r1", 100)
    assert (retired.coverage.pending, retired.coverage.missing) == (0, 4)
    missing = await store.read_sync(
        partial(
            rollout_evidence_page,
            rollout_id="nobody",
            window=Window(datetime.now(UTC), GRACE_S),
            limit=10,
        )
    )
    assert missing is None
