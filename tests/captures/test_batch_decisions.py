"""A batch request decides each item exactly as single appends in the same order would."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from typing import Any

import httpx
import pytest

from ledger.areas.captures import service
from ledger.areas.captures.service import CaptureService, PreparedExchange
from ledger.log.store import LedgerStore
from tests.support.exchanges import chat_exchange, messages_exchange


def _items(prefix: str) -> list[dict[str, Any]]:
    """Repeats and conflicts inside the batch, across two rollouts, one already holding calls."""
    return [
        {"rollout_id": f"{prefix}-a", "exchange": chat_exchange(model_call_id="n1")},
        {"rollout_id": f"{prefix}-b", "exchange": messages_exchange(model_call_id="n1")},
        {"rollout_id": f"{prefix}-a", "exchange": chat_exchange(model_call_id="n1")},
        {"rollout_id": f"{prefix}-a", "exchange": chat_exchange(model_call_id="n1", text="x")},
        {"rollout_id": f"{prefix}-a", "exchange": chat_exchange(model_call_id="old")},
        {"rollout_id": f"{prefix}-a", "exchange": chat_exchange(model_call_id="old", text="y")},
        {"rollout_id": f"{prefix}-a", "exchange": chat_exchange(model_call_id="n2")},
        {"rollout_id": f"{prefix}-b", "exchange": messages_exchange(model_call_id="n2")},
    ]


async def _prepare(client: httpx.AsyncClient, prefix: str) -> None:
    reply = await client.post(
        f"/v1/rollouts/{prefix}-a/model-calls", json=chat_exchange(model_call_id="old")
    )
    assert reply.status_code == 201


def _decisions(results: list[dict[str, Any]]) -> list[tuple[int, int | None]]:
    return [(r["status"], r.get("call_index")) for r in results]


async def test_batch_matches_single_appends_in_order(client: httpx.AsyncClient) -> None:
    await _prepare(client, "one")
    singles = []
    for item in _items("one"):
        reply = await client.post(
            f"/v1/rollouts/{item['rollout_id']}/model-calls", json=item["exchange"]
        )
        body = reply.json()
        singles.append({"status": reply.status_code, "call_index": body.get("call_index")})

    await _prepare(client, "many")
    reply = await client.post("/v1/model-calls/batch", json={"items": _items("many")})
    assert reply.status_code == 200
    results = reply.json()["results"]

    assert _decisions(results) == _decisions(singles)
    assert _decisions(results) == [
        (201, 1),
        (201, 0),
        (200, 1),
        (409, None),
        (200, 0),
        (409, None),
        (201, 2),
        (201, 1),
    ]
    # A repeat inside the batch answers with the original's receipt.
    assert results[2]["seq"] == results[0]["seq"]
    assert "'n1'" in results[3]["detail"]
    calls = (await client.get("/v1/rollouts/many-a/model-calls")).json()["calls"]
    assert [(c["model_call_id"], c["call_index"]) for c in calls] == [
        ("old", 0),
        ("n1", 1),
        ("n2", 2),
    ]


async def test_batch_after_clear_starts_positions_again(client: httpx.AsyncClient) -> None:
    await _prepare(client, "c")
    assert (await client.delete("/v1/rollouts/c-a/model-calls")).status_code == 200
    items = [
        {"rollout_id": "c-a", "exchange": chat_exchange(model_call_id="old", text="new")},
        {"rollout_id": "c-a", "exchange": chat_exchange(model_call_id="n1")},
    ]
    reply = await client.post("/v1/model-calls/batch", json={"items": items})
    assert _decisions(reply.json()["results"]) == [(201, 0), (201, 1)]


async def test_a_yielding_batch_gives_the_loop_a_turn_after_each_item(
    store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture proxy appends its batches in the background with ``yielding=True``: each
    item's validation and derivation is followed by a turn of the event loop, so a call being
    forwarded meanwhile waits for one item's work, not the whole batch's."""
    captures = CaptureService(store)
    ticks = 0

    async def other_request() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    seen: list[int] = []  # the other coroutine's turns so far, as each item is prepared
    prepare = service.prepare_batch_item

    def counted(item: object, where: str) -> PreparedExchange:
        seen.append(ticks)
        return prepare(item, where)

    monkeypatch.setattr(service, "prepare_batch_item", counted)
    ticker = asyncio.create_task(other_request())
    await asyncio.sleep(0)
    try:
        for yielding in (False, True):
            seen.clear()
            items = [
                {
                    "rollout_id": "r-turns",
                    "exchange": chat_exchange(model_call_id=f"{yielding}-{n}"),
                }
                for n in range(10)
            ]
            results = await captures.append_many(items, yielding=yielding)
            assert [r.status for r in results] == [201] * len(items)
            turns_between = [later - earlier for earlier, later in pairwise(seen)]
            assert len(turns_between) == len(items) - 1
            if yielding:
                assert all(turns >= 1 for turns in turns_between), turns_between
            else:
                assert all(turns == 0 for turns in turns_between), turns_between
    finally:
        ticker.cancel()
