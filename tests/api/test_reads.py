"""GET /v1/events (paging, limits, validation) and GET /v1/rollouts/{id}."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ledger.app.config import Settings
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from tests.api.support import ledger_of, running_app


async def append_retirements(app: FastAPI, count: int) -> None:
    store = ledger_of(app).store
    for n in range(count):
        await store.append(NewEvent(ROLLOUT_RETIRED, {"had_rows": n % 2 == 0}, f"r{n}"))


def error_locations(response: httpx.Response) -> list[list[Any]]:
    return [list(error["loc"]) for error in response.json()["detail"]]


async def test_events_are_paged_by_seq(app: FastAPI, client: httpx.AsyncClient) -> None:
    await append_retirements(app, 7)
    seen: list[int] = []
    after = 0
    while True:
        response = await client.get("/v1/events", params={"after": after, "limit": 3})
        assert response.status_code == 200
        page = response.json()
        seqs = [event["seq"] for event in page["events"]]
        assert seqs == list(range(after + 1, after + 1 + len(seqs)))
        if not seqs:
            assert page["next_after"] == after
            break
        assert page["next_after"] == seqs[-1]
        seen.extend(seqs)
        after = page["next_after"]
    assert seen == [1, 2, 3, 4, 5, 6, 7]


async def test_an_event_carries_its_envelope_and_payload(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await append_retirements(app, 1)
    (event,) = (await client.get("/v1/events")).json()["events"]
    assert event["seq"] == 1
    assert event["kind"] == ROLLOUT_RETIRED
    assert event["rollout_id"] == "r0"
    assert event["generation"] == 0
    assert event["payload"] == {"had_rows": True}
    assert len(event["hash"]) == 64 and len(event["payload_sha256"]) == 64
    assert event["recorded_at"].endswith("Z") or event["recorded_at"].endswith("+00:00")


async def test_events_filtered_by_rollout(app: FastAPI, client: httpx.AsyncClient) -> None:
    await append_retirements(app, 3)
    response = await client.get("/v1/events", params={"rollout_id": "r1"})
    assert [e["rollout_id"] for e in response.json()["events"]] == ["r1"]
    bad = await client.get("/v1/events", params={"rollout_id": "a b"})
    assert bad.status_code == 400
    assert bad.json() == {"detail": "Invalid rollout id: 'a b'"}


async def test_the_page_size_is_capped_at_events_page_max(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url, events_page_max=4)
    async with running_app(settings) as (app, http):
        await append_retirements(app, 10)
        response = await http.get("/v1/events", params={"limit": 1000})
    assert response.status_code == 200
    assert [e["seq"] for e in response.json()["events"]] == [1, 2, 3, 4]
    assert response.json()["next_after"] == 4


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"after": -1}, "after"),
        ({"limit": 0}, "limit"),
        ({"limit": -5}, "limit"),
        ({"after": "abc"}, "after"),
        ({"limit": "1.5"}, "limit"),
        ({"after": str(2**63)}, "after"),
        ({"after": "9" * 40}, "after"),
    ],
)
async def test_bad_paging_parameters_are_422_naming_the_field(
    client: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    response = await client.get("/v1/events", params=params)
    assert response.status_code == 422
    assert ["query", field] in error_locations(response)


async def test_the_largest_cursor_is_an_empty_page(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/events", params={"after": 2**63 - 1, "limit": 10**30})
    assert response.status_code == 200
    assert response.json() == {"events": [], "next_after": 2**63 - 1}


async def test_rollout_state_and_generation(app: FastAPI, client: httpx.AsyncClient) -> None:
    store = ledger_of(app).store
    await store.append(NewEvent(ROLLOUT_RETIRED, {}, "r-1.a_b"))
    retired = await client.get("/v1/rollouts/r-1.a_b")
    assert retired.status_code == 200
    body = retired.json()
    assert (body["rollout_id"], body["state"], body["generation"]) == ("r-1.a_b", "retired", 0)
    assert (body["first_seq"], body["last_seq"]) == (1, 1)
    await store.append(NewEvent(ROLLOUT_DELETED, {}, "r-1.a_b"))
    deleted = (await client.get("/v1/rollouts/r-1.a_b")).json()
    assert (deleted["state"], deleted["generation"], deleted["last_seq"]) == ("live", 1, 2)


async def test_a_rollout_never_seen_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/rollouts/never-seen")
    assert response.status_code == 404
    assert "never-seen" in response.json()["detail"]


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ("a b", "a%20b"),
        ("röllout", "r%C3%B6llout"),
        (".hidden", ".hidden"),
        ("-dash-first", "-dash-first"),
        ("x" * 201, "x" * 201),
        ("a\\b", "a%5Cb"),
    ],
)
async def test_a_bad_rollout_id_is_400(client: httpx.AsyncClient, raw: str, path: str) -> None:
    response = await client.get(f"/v1/rollouts/{path}")
    assert response.status_code == 400
    assert response.json() == {"detail": f"Invalid rollout id: {raw!r}"}


@pytest.mark.parametrize("path", ["/v1/rollouts/a/b", "/v1/rollouts/a%2Fb", "/v1/rollouts/"])
async def test_a_slash_in_the_id_matches_no_route(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path)
    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found"}
