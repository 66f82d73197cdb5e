"""A capture's derivation, made before the writer at position 0, gives the rows derived in place.

``prepare_exchange`` derives the call's record once, off the writer's thread; the projectors
put the position in. ``verify`` rebuilds every projection from the events alone (no
derivation handed over), so a difference between the two paths would show as a row mismatch.
"""

from __future__ import annotations

from typing import Any

import pytest

from ledger.app.areas import default_projectors
from ledger.app.bootstrap import catch_up_views
from ledger.areas.captures.derivation import (
    at_position,
    derive_call,
    record_text,
    trajectory_entry_dump,
)
from ledger.areas.captures.service import CaptureService
from ledger.gym.model_calls import PAYLOAD_FIELDS, build_model_call_record, dump_with_payloads
from ledger.log.store import LedgerStore
from ledger.log.verify import verify_chain, verify_projections
from tests.support.exchanges import (
    chat_exchange,
    failed_exchange,
    messages_exchange,
    responses_exchange,
)

EXCHANGES: list[dict[str, Any]] = [
    chat_exchange(model_call_id="chat", text="ünï ☃"),
    responses_exchange(model_call_id="responses"),
    messages_exchange(model_call_id="messages"),
    failed_exchange(model_call_id="failed"),
    {**chat_exchange(model_call_id="damaged"), "status_code": "not a number"},
    {**chat_exchange(model_call_id="tiny"), "latency_ms": 1e-7, "started_at": 1e15},
]


@pytest.mark.parametrize("exchange", EXCHANGES, ids=lambda e: str(e["model_call_id"]))
@pytest.mark.parametrize("call_index", [0, 3, 117])
def test_derived_at_a_position_is_the_record_built_at_that_position(
    exchange: dict[str, Any], call_index: int
) -> None:
    derived = derive_call(exchange)
    try:
        built = build_model_call_record(exchange, call_index)
    except ValueError:
        assert derived.damaged and derived.columns == {"damaged": True}
        return
    assert derived.record is not None
    without = built.model_dump(mode="json", exclude=set(PAYLOAD_FIELDS))
    assert record_text(at_position(derived.record, call_index)) == record_text(without)
    # The record with payloads as the observations view puts it together: the stored
    # payload-free record and the event's exchange.
    call = dump_with_payloads(at_position(derived.record, call_index), exchange)
    assert list(call) == list(built.model_dump(mode="json"))
    assert call == built.model_dump(mode="json")
    assert derived.trajectory_entry == trajectory_entry_dump(built.model_dump(mode="json"))


async def test_captures_through_the_service_rebuild_identically(store: LedgerStore) -> None:
    captures = CaptureService(store)
    # (a damaged call comes only from the importer: the service refuses such an exchange)
    valid = [e for e in EXCHANGES if e["model_call_id"] != "damaged"]
    for n, exchange in enumerate(valid):
        await captures.append(f"r{n % 2}", exchange)
    results = await captures.append_many(
        [
            {"rollout_id": "r2", "exchange": {**e, "model_call_id": f"b-{i}"}}
            for i, e in enumerate(valid)
        ]
    )
    assert [r.status for r in results] == [201] * len(valid)
    await catch_up_views(store)  # the capture view derives behind the append
    async with store.read() as conn:
        chain = await verify_chain(conn)
        projections = await verify_projections(conn, store.catalogue, default_projectors())
    assert chain.ok, chain.problem
    assert projections.ok, projections.differences
