"""Recording rows, admission and parent lookup over HTTP, on every backend."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from ledger.log.store import LedgerStore
from tests.conftest import CONTROL_HEADERS
from tests.lineage.rows import committed_row, failure_row, manifest_record
from tests.support.views import views_caught_up

CONTROL = "/training-token-capture/control"


async def post_row(client: httpx.AsyncClient, rollout_id: str, row: dict[str, Any]) -> Any:
    reply = await client.post(f"/v1/rollouts/{rollout_id}/ledger/rows", json=row)
    assert reply.status_code == 200, reply.text
    return reply.json()


async def manifest(client: httpx.AsyncClient, rollout_id: str) -> httpx.Response:
    return await client.get(f"{CONTROL}/rollouts/{rollout_id}/manifest", headers=CONTROL_HEADERS)


async def kinds(client: httpx.AsyncClient) -> list[str]:
    reply = await client.get("/v1/events", params={"limit": 1000})
    return [e["kind"] for e in reply.json()["events"]]


async def test_record_then_manifest(client: httpx.AsyncClient) -> None:
    root = committed_row("r1", "c1")
    child = committed_row("r1", "c2", parent=root)
    first = await post_row(client, "r1", root)
    assert first["outcome"] == "recorded" and isinstance(first["seq"], int)
    await post_row(client, "r1", failure_row("c9"))
    await post_row(client, "r1", child)
    reply = await manifest(client, "r1")
    assert reply.status_code == 200
    assert reply.json() == {
        "schema_version": 2,
        "rollout_id": "r1",
        "records": [manifest_record(root), manifest_record(child)],
        "failures": [
            {"schema_version": 2, "model_call_id": "c9", "reason": "worker_capture_failed"}
        ],
    }


async def test_identical_rerecord_is_a_duplicate(client: httpx.AsyncClient) -> None:
    row = committed_row("r1", "c1")
    first = await post_row(client, "r1", row)
    again = await post_row(client, "r1", row)
    assert again == {"outcome": "duplicate", "seq": first["seq"]}
    assert await kinds(client) == ["ledger.row_recorded"]


async def test_identical_failure_rows_are_deduplicated(client: httpx.AsyncClient) -> None:
    await post_row(client, "r1", failure_row("c1"))
    assert (await post_row(client, "r1", failure_row("c1")))["outcome"] == "duplicate"
    other = await post_row(client, "r1", failure_row("c1", "unresolved_parent"))
    assert other["outcome"] == "recorded"
    body = (await manifest(client, "r1")).json()
    assert [f["reason"] for f in body["failures"]] == ["worker_capture_failed", "unresolved_parent"]


@pytest.mark.parametrize(
    "change",
    [
        {"chain_hash": "f" * 64},
        {"weight_version": 18},
        {"response_id": "chatcmpl-other"},
        {"admitted_at": 1755600001.0},
    ],
)
async def test_same_call_with_any_different_column_conflicts(
    client: httpx.AsyncClient, change: dict[str, Any]
) -> None:
    await post_row(client, "r1", committed_row("r1", "c1"))
    reply = await client.post(
        "/v1/rollouts/r1/ledger/rows", json=committed_row("r1", "c1", **change)
    )
    assert reply.status_code == 409
    assert reply.json() == {"detail": "conflicting lineage record for model call c1"}
    assert await kinds(client) == ["ledger.row_recorded"]


async def test_same_call_id_in_another_rollout_is_independent(client: httpx.AsyncClient) -> None:
    await post_row(client, "r1", committed_row("r1", "c1"))
    assert (await post_row(client, "r2", committed_row("r2", "c1")))["outcome"] == "recorded"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"extra_column": 1}, "extra_column"),
        ({"prev_len": -1}, "prev_len"),
        ({"cum_len": "900"}, "cum_len"),
        ({"admitted_at": "soon"}, "admitted_at"),
        ({"staging_chain": [1]}, "staging_chain"),
    ],
)
async def test_bad_rows_are_422_naming_the_field(
    client: httpx.AsyncClient, overrides: dict[str, Any], field: str
) -> None:
    reply = await client.post(
        "/v1/rollouts/r1/ledger/rows", json={**committed_row("r1", "c1"), **overrides}
    )
    assert reply.status_code == 422
    assert any(field in error["loc"] for error in reply.json()["detail"])
    assert await kinds(client) == []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
async def test_non_finite_floats_are_refused(client: httpx.AsyncClient, value: float) -> None:
    # Python's json writes NaN/Infinity literals; the ledger must refuse them, not store them.
    text = json.dumps(committed_row("r1", "c1", admitted_at=value))
    reply = await client.post(
        "/v1/rollouts/r1/ledger/rows",
        content=text.encode(),
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 422
    assert any("admitted_at" in error["loc"] for error in reply.json()["detail"])
    assert await kinds(client) == []


async def test_bad_rollout_id_is_400(client: httpx.AsyncClient) -> None:
    reply = await client.post("/v1/rollouts/.hidden/ledger/rows", json=committed_row("x", "c1"))
    assert reply.status_code == 400
    assert reply.json() == {"detail": "Invalid rollout id: '.hidden'"}


async def test_failure_row_with_extra_keys_is_422(client: httpx.AsyncClient) -> None:
    reply = await client.post(
        "/v1/rollouts/r1/ledger/rows", json={**failure_row("c1"), "note": "x"}
    )
    assert reply.status_code == 422


async def test_late_rows_after_retire_are_discarded_with_a_warning(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    await post_row(client, "r1", committed_row("r1", "c1"))
    retired = await client.post(
        f"{CONTROL}/rollouts/retire", json={"rollout_ids": ["r1"]}, headers=CONTROL_HEADERS
    )
    assert retired.json() == {"removed": ["r1"], "absent": []}
    with caplog.at_level(logging.WARNING, logger="ledger.areas.lineage.service"):
        late = await post_row(client, "r1", committed_row("r1", "c2"))
        late_failure = await post_row(client, "r1", failure_row("c3"))
    assert late["outcome"] == "discarded" and late_failure["outcome"] == "discarded"
    assert any("r1/c2" in record.getMessage() for record in caplog.records)
    assert (await manifest(client, "r1")).status_code == 410
    keys = (await client.get("/v1/orphaned-staging-keys")).json()
    assert [(k["rollout_id"], k["model_call_id"], k["staging_key"]) for k in keys["keys"]] == [
        ("r1", "c2", "r1/c2")
    ]
    assert keys["next_after"] == late["seq"]
    assert (await client.get("/v1/orphaned-staging-keys", params={"after": late["seq"]})).json()[
        "keys"
    ] == []
    assert await kinds(client) == [
        "ledger.row_recorded",
        "rollout.retired",
        "ledger.row_discarded",
        "ledger.row_discarded",
    ]


async def test_rerecording_a_row_the_trainer_already_saw_is_a_duplicate_after_retire(
    client: httpx.AsyncClient,
) -> None:
    row = committed_row("r1", "c1")
    first = await post_row(client, "r1", row)
    await client.post(
        f"{CONTROL}/rollouts/retire", json={"rollout_ids": ["r1"]}, headers=CONTROL_HEADERS
    )
    assert await post_row(client, "r1", row) == {"outcome": "duplicate", "seq": first["seq"]}
    assert (await client.get("/v1/orphaned-staging-keys")).json()["keys"] == []


async def test_admission(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/rollouts/new-1/admission")).json() == {
        "admitted": True,
        "generation": 0,
    }
    await client.post(
        f"{CONTROL}/rollouts/retire", json={"rollout_ids": ["new-1"]}, headers=CONTROL_HEADERS
    )
    gone = await client.get("/v1/rollouts/new-1/admission")
    assert gone.status_code == 410
    assert gone.json() == {"detail": "rollout new-1 is retired"}
    await client.post(
        f"{CONTROL}/rollouts/delete", json={"rollout_ids": ["new-1"]}, headers=CONTROL_HEADERS
    )
    assert (await client.get("/v1/rollouts/new-1/admission")).json() == {
        "admitted": True,
        "generation": 1,
    }
    assert (await client.get("/v1/rollouts/a%20b/admission")).status_code == 400


async def test_parent_lookup_by_fingerprint_and_by_model_call_id(
    client: httpx.AsyncClient,
) -> None:
    root = committed_row("r1", "c1")
    await post_row(client, "r1", root)
    await post_row(client, "r1", failure_row("c2"))
    await post_row(client, "r1", committed_row("r1", "c3", parent=root))
    by_fp = (
        await client.get("/v1/rollouts/r1/ledger/rows", params={"fingerprint": root["fingerprint"]})
    ).json()
    assert by_fp["generation"] == 0
    assert [r["row"] for r in by_fp["rows"]] == [root]
    by_id = (await client.get("/v1/rollouts/r1/ledger/rows", params={"model_call_id": "c3"})).json()
    assert [r["row"]["parent_call_id"] for r in by_id["rows"]] == ["c1"]
    # Failure rows never resolve as parents.
    failures = await client.get("/v1/rollouts/r1/ledger/rows", params={"model_call_id": "c2"})
    assert failures.json()["rows"] == []
    assert (await client.get("/v1/rollouts/r1/ledger/rows")).status_code == 400


async def test_lineage_projection_rebuilds_identically(client: httpx.AsyncClient, app: Any) -> None:
    from ledger.app.areas import default_projectors
    from ledger.log.verify import verify_projections

    for rollout_id in ("r1", "r2", "r3"):
        root = committed_row(rollout_id, "c1")
        await post_row(client, rollout_id, root)
        await post_row(client, rollout_id, committed_row(rollout_id, "c2", parent=root))
        await post_row(client, rollout_id, failure_row("c3"))
    await client.post(
        f"{CONTROL}/rollouts/retire", json={"rollout_ids": ["r1", "r2"]}, headers=CONTROL_HEADERS
    )
    await post_row(client, "r1", committed_row("r1", "c4"))
    await client.post(
        f"{CONTROL}/rollouts/delete", json={"rollout_ids": ["r2"]}, headers=CONTROL_HEADERS
    )
    await views_caught_up(app)
    store: LedgerStore = app.state.ledger.store
    async with store.read() as conn:
        # Fresh projectors: the running store's keep state its writer may be using meanwhile.
        report = await verify_projections(conn, store.catalogue, default_projectors())
    assert report.ok, report.differences


async def test_has_rows_counts_committed_and_failure_rows(client: httpx.AsyncClient) -> None:
    async def has_rows(rollout_id: str) -> httpx.Response:
        return await client.get(f"/v1/rollouts/{rollout_id}/ledger/has-rows")

    assert (await has_rows("h1")).json() == {"has_rows": False, "generation": 0}
    await post_row(client, "h1", failure_row("c1"))
    assert (await has_rows("h1")).json() == {"has_rows": True, "generation": 0}
    await post_row(client, "h2", committed_row("h2", "c1"))
    assert (await has_rows("h2")).json()["has_rows"] is True
    await client.post(
        f"{CONTROL}/rollouts/retire", json={"rollout_ids": ["h1"]}, headers=CONTROL_HEADERS
    )
    gone = await has_rows("h1")
    assert gone.status_code == 410
    assert gone.json() == {"detail": "rollout h1 is retired"}
    await client.post(
        f"{CONTROL}/rollouts/delete", json={"rollout_ids": ["h1"]}, headers=CONTROL_HEADERS
    )
    assert (await has_rows("h1")).json() == {"has_rows": False, "generation": 1}
    assert (await has_rows("a%20b")).status_code == 400
