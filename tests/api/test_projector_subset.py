"""``create_app(settings, projectors)``: the ingest diagnostics' server with a subset of the write
side's projectors (the views follow the log whatever the subset)."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import func, select

from ledger.app.areas import write_side_projectors
from ledger.app.config import Settings
from ledger.app.http.app import create_app
from ledger.areas.evidence.tables import evidence_calls
from ledger.areas.observations.tables import observation_records
from tests.api.support import ledger_of
from tests.support.exchanges import chat_exchange


@pytest.mark.parametrize(
    ("left_out", "evidence_rows"),
    [pytest.param(set(), 1, id="default"), pytest.param({"evidence"}, 0, id="subset")],
)
async def test_create_app_serves_and_appends_with_the_given_projectors(
    settings: Settings, left_out: set[str], evidence_rows: int
) -> None:
    projectors = None
    if left_out:
        projectors = [p for p in write_side_projectors() if p.name not in left_out]
    application = create_app(settings, projectors)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            appended = await http.post(
                "/v1/rollouts/r1/model-calls", json=chat_exchange(model_call_id="call-a")
            )
            listed = await http.get("/v1/rollouts/r1/model-calls")
        store = ledger_of(application).store
        await ledger_of(application).freshness.wait_for_seq(await store.head_seq())
        async with store.read() as conn:
            observed = await conn.execute(select(func.count()).select_from(evidence_calls))
            stored_rows = observed.scalar_one()
            observed = await conn.execute(select(func.count()).select_from(observation_records))
            stored_records = observed.scalar_one()

    assert appended.status_code == 201, appended.text
    assert appended.json() == {
        "rollout_id": "r1",
        "model_call_id": "call-a",
        "call_index": 0,
        "seq": 1,
    }
    # The captures projection ran in both: the call is listed.
    assert [call["model_call_id"] for call in listed.json()["calls"]] == ["call-a"]
    assert [p.name for p in store.projectors] == [
        p.name for p in write_side_projectors() if p.name not in left_out
    ]
    # The evidence projection ran only when it was in the list; the observations view follows
    # the log in both.
    assert stored_rows == evidence_rows
    assert stored_records == 1
