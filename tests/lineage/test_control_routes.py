"""Gym's control routes, exactly per contract §3.8, on every backend."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ledger.app.bootstrap import Ledger
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row, failure_row

CONTROL = "/training-token-capture/control"


async def post_row(client: httpx.AsyncClient, rollout_id: str, row: dict[str, Any]) -> None:
    reply = await client.post(f"/v1/rollouts/{rollout_id}/ledger/rows", json=row)
    assert reply.status_code == 200, reply.text


async def control(
    client: httpx.AsyncClient, action: str, ids: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    return await client.post(
        f"{CONTROL}/rollouts/{action}",
        json={"rollout_ids": ids},
        headers=CONTROL_HEADERS if headers is None else headers,
    )


async def manifest(client: httpx.AsyncClient, rollout_id: str) -> httpx.Response:
    return await client.get(f"{CONTROL}/rollouts/{rollout_id}/manifest", headers=CONTROL_HEADERS)


async def event_count(client: httpx.AsyncClient) -> int:
    return len((await client.get("/v1/events", params={"limit": 1000})).json()["events"])


async def test_unknown_id_has_an_empty_manifest(client: httpx.AsyncClient) -> None:
    reply = await manifest(client, "never-seen")
    assert reply.status_code == 200
    assert reply.json() == {
        "schema_version": 2,
        "rollout_id": "never-seen",
        "records": [],
        "failures": [],
    }


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "bearer control-secret"},
        {"Authorization": "Bearer  control-secret"},
        {"Authorization": "control-secret"},
    ],
)
async def test_manifest_needs_the_exact_bearer_token(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    reply = await client.get(f"{CONTROL}/rollouts/r1/manifest", headers=headers)
    assert reply.status_code == 401
    assert reply.json() == {"detail": "missing or invalid control-plane bearer token"}


async def test_manifest_bad_id_is_400_and_slash_is_404(client: httpx.AsyncClient) -> None:
    bad = await manifest(client, "r%20x")
    assert bad.status_code == 400
    assert bad.json() == {"detail": "Invalid rollout id: 'r x'"}
    assert (await manifest(client, ".hidden")).status_code == 400
    assert (await manifest(client, "a%2Fb")).status_code == 404
    assert (await manifest(client, "a/b")).status_code == 404


async def test_retire_fences_every_id_and_reports_removed_and_absent(
    client: httpx.AsyncClient, app: Any
) -> None:
    await post_row(client, "r1", committed_row("r1", "c1"))
    await post_row(client, "r3", failure_row("c1"))
    reply = await control(client, "retire", ["r1", "r2", "r1", "r3"])
    assert reply.status_code == 200
    assert reply.json() == {"removed": ["r1", "r3"], "absent": ["r2"]}
    for rollout_id in ("r1", "r2", "r3"):
        gone = await manifest(client, rollout_id)
        assert gone.status_code == 410
        assert gone.json() == {"detail": f"rollout {rollout_id} is retired"}
    events_after_first = await event_count(client)
    again = await control(client, "retire", ["r1", "r2"])
    assert again.json() == {"removed": [], "absent": ["r1", "r2"]}
    assert await event_count(client) == events_after_first  # no metadata rewrite
    ledger: Ledger = app.state.ledger
    assert ledger.metrics.fences._value.get() == 3


async def test_delete_ends_the_generation_and_the_id_is_reusable(
    client: httpx.AsyncClient,
) -> None:
    await post_row(client, "r1", committed_row("r1", "c1"))
    await control(client, "retire", ["r1", "fenced-only"])
    reply = await control(client, "delete", ["r1", "fenced-only", "never-seen"])
    # Retire already removed r1's ledger: the delete removes only fences.
    assert reply.json() == {"removed": [], "absent": ["r1", "fenced-only", "never-seen"]}
    for rollout_id in ("r1", "fenced-only", "never-seen"):
        body = (await manifest(client, rollout_id)).json()
        assert (body["records"], body["failures"]) == ([], [])
    # Reuse from an empty ledger: the same call id records again, as a new row.
    await post_row(client, "r1", committed_row("r1", "c1", weight_version=99))
    body = (await manifest(client, "r1")).json()
    assert [r["weight_version"] for r in body["records"]] == [99]
    again = await control(client, "delete", ["r1", "fenced-only"])
    assert again.json() == {"removed": ["r1"], "absent": ["fenced-only"]}
    assert (await control(client, "delete", ["r1"])).json() == {"removed": [], "absent": ["r1"]}


async def test_delete_of_a_live_rollout_with_rows(client: httpx.AsyncClient) -> None:
    await post_row(client, "r1", committed_row("r1", "c1"))
    assert (await control(client, "delete", ["r1"])).json() == {"removed": ["r1"], "absent": []}
    assert (await manifest(client, "r1")).json()["records"] == []


@pytest.mark.parametrize("action", ["retire", "delete"])
@pytest.mark.parametrize(
    "body",
    [
        {"rollout_ids": []},
        {"rollout_ids": [f"r{i}" for i in range(4097)]},
        {"rollout_ids": ["r1"], "force": True},
        {"rollout_ids": [1, 2]},
        {"rollout_ids": "r1"},
        {},
    ],
)
async def test_malformed_bodies_are_422_even_without_a_token(
    client: httpx.AsyncClient, action: str, body: dict[str, Any]
) -> None:
    reply = await client.post(f"{CONTROL}/rollouts/{action}", json=body)
    assert reply.status_code == 422
    assert await event_count(client) == 0


@pytest.mark.parametrize("action", ["retire", "delete"])
async def test_removals_need_the_token(client: httpx.AsyncClient, action: str) -> None:
    reply = await control(client, action, ["r1"], headers={"Authorization": "Bearer nope"})
    assert reply.status_code == 401
    assert reply.json() == {"detail": "missing or invalid control-plane bearer token"}
    assert await event_count(client) == 0


@pytest.mark.parametrize("action", ["retire", "delete"])
async def test_one_bad_id_changes_nothing(client: httpx.AsyncClient, action: str) -> None:
    await post_row(client, "r1", committed_row("r1", "c1"))
    reply = await control(client, action, ["r1", "ok-2", "bad/id", "r 4"])
    assert reply.status_code == 400
    assert reply.json() == {"detail": "Invalid rollout id: 'bad/id'"}
    assert await event_count(client) == 1
    assert (await manifest(client, "r1")).status_code == 200


async def test_4096_ids_in_one_request(client: httpx.AsyncClient) -> None:
    ids = [f"bulk-{i}" for i in range(4096)]
    await post_row(client, "bulk-7", committed_row("bulk-7", "c1"))
    retired = (await control(client, "retire", ids)).json()
    assert retired["removed"] == ["bulk-7"]
    assert retired["absent"] == [i for i in ids if i != "bulk-7"]
    deleted = (await control(client, "delete", ids)).json()
    assert deleted == {"removed": [], "absent": ids}  # retire already removed bulk-7's ledger
    assert (await manifest(client, "bulk-4095")).status_code == 200


async def test_hold_refuses_removals_with_its_reason(client: httpx.AsyncClient, app: Any) -> None:
    ledger: Ledger = app.state.ledger
    await post_row(client, "r1", committed_row("r1", "c1"))
    assert await ledger.lineage.hold("checkpoint 12 is open")
    for action in ("retire", "delete"):
        reply = await control(client, action, ["r1"])
        assert reply.status_code == 409
        assert reply.json() == {"detail": "checkpoint 12 is open"}
    # Body validation and auth still come first.
    assert (await client.post(f"{CONTROL}/rollouts/retire", json={})).status_code == 422
    assert (await control(client, "retire", ["r1"], headers={})).status_code == 401
    assert (await manifest(client, "r1")).status_code == 200
    status = await ledger.lineage.hold_status()
    assert status is not None and status.reason == "checkpoint 12 is open"
    assert await ledger.lineage.release()
    assert not await ledger.lineage.release()
    assert (await control(client, "retire", ["r1"])).json() == {"removed": ["r1"], "absent": []}
