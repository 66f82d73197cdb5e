"""The overview's call-evidence filter, in-process on both backends: the rollouts it lists are
exactly those whose call evidence (``GET /v1/rollouts/{id}/call-evidence``) names a call
missing (its capture or its lineage row), or pending."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from ledger.app.config import Settings
from ledger.app.http.app import create_app
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import failure_row
from tests.support import viewer_data as data


async def _admit(client: httpx.AsyncClient, rollout_id: str, *calls: str) -> None:
    reply = await client.post(
        f"/v1/rollouts/{rollout_id}/model-calls/intents", json={"model_call_ids": list(calls)}
    )
    reply.raise_for_status()
    for model_call_id in calls:
        row = failure_row(model_call_id)
        (await client.post(f"/v1/rollouts/{rollout_id}/ledger/rows", json=row)).raise_for_status()


async def _capture(client: httpx.AsyncClient, rollout_id: str, *calls: str) -> None:
    for n, model_call_id in enumerate(calls):
        body = data.exchange(model_call_id, data.T0 + n, data.T0 + n + 1)
        reply = await client.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body)
        reply.raise_for_status()


def _ids(text: str) -> list[str]:
    return re.findall(r'<tr data-rollout="([^"]+)"', text)


async def _listed(client: httpx.AsyncClient, query: str) -> list[str]:
    reply = await client.get(f"/ui/?limit=100&{query}")
    assert reply.status_code == 200, reply.text
    return _ids(reply.text)


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A window far longer than the test: a live rollout's uncaptured call stays pending;
    retiring names it missing at once."""
    application = create_app(settings.model_copy(update={"capture_grace_s": 3600.0}))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http


async def test_the_evidence_filter_lists_what_the_call_evidence_names(
    client: httpx.AsyncClient,
) -> None:
    await _admit(client, "complete", "a", "b")
    await _capture(client, "complete", "a", "b")
    await _admit(client, "lost", "a", "b")
    await _capture(client, "lost", "a")
    await _admit(client, "stray", "a")
    await _capture(client, "stray", "a", "x")
    await _admit(client, "live", "a", "b")
    await _capture(client, "live", "a")
    await _capture(client, "captures-only", "a")
    await _admit(client, "off", "a")
    retired = ["complete", "lost", "stray", "off"]
    reply = await client.post(
        "/training-token-capture/control/rollouts/retire",
        json={"rollout_ids": retired},
        headers=CONTROL_HEADERS,
    )
    assert reply.status_code == 200, reply.text

    named: dict[str, set[str]] = {}
    for rollout_id in ["captures-only", "complete", "live", "lost", "off", "stray"]:
        evidence = (await client.get(f"/v1/rollouts/{rollout_id}/call-evidence")).json()
        named[rollout_id] = set(evidence["findings"])
    assert named == {
        "captures-only": set(),
        "complete": set(),
        "live": {"model_call_capture_pending"},
        "lost": {"model_call_capture_missing"},
        "off": {"model_call_capture_missing"},
        "stray": {"model_call_lineage_row_missing"},
    }
    assert await _listed(client, "evidence=missing") == ["lost", "off", "stray"]
    assert await _listed(client, "evidence=pending") == ["live"]
    assert await _listed(client, "evidence=missing&id=s*") == ["stray"]
    assert await _listed(client, "") == sorted(named)
    bad = await client.get("/ui/?evidence=lost")
    assert bad.status_code == 400
    assert "evidence: expected missing or pending" in bad.text
