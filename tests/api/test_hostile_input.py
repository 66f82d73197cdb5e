"""Input JSON can carry but a database cannot store, and cursors past the 64-bit range: clear
4xx answers, never a 500, and nothing stored."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import CONTROL_HEADERS

# JSON may spell a lone UTF-16 surrogate; it is not Unicode and no database can store it.
LONE_SURROGATE = '"\\ud800"'


async def test_a_lone_surrogate_in_a_capture_is_refused(client: httpx.AsyncClient) -> None:
    body = '{"dialect": "chat", "request": {"model": ' + LONE_SURROGATE + "}}"
    response = await client.post(
        "/v1/rollouts/r1/model-calls", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert "surrogate" in response.json()["detail"]
    assert (await client.get("/v1/events")).json()["events"] == []


async def test_a_lone_surrogate_in_a_lineage_row_is_refused(client: httpx.AsyncClient) -> None:
    body = '{"failure_reason": "worker_capture_failed", "model_call_id": ' + LONE_SURROGATE + "}"
    response = await client.post(
        "/v1/rollouts/r1/ledger/rows", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert (await client.get("/v1/events")).json()["events"] == []


async def test_an_error_echoing_a_lone_surrogate_still_renders(client: httpx.AsyncClient) -> None:
    body = '{"rollout_ids": ["r1"], ' + LONE_SURROGATE + ": 1}"
    response = await client.post(
        "/training-token-capture/control/rollouts/retire",
        content=body,
        headers={"content-type": "application/json", **CONTROL_HEADERS},
    )
    assert response.status_code == 422
    assert "\\ud800" in response.text


@pytest.mark.parametrize(
    "url",
    [
        "/v1/events?after=18446744073709551616",
        "/v1/orphaned-staging-keys?after=18446744073709551616",
        "/v1/export?after_seq=18446744073709551616",
    ],
)
async def test_cursors_beyond_64_bits_are_422(client: httpx.AsyncClient, url: str) -> None:
    response = await client.get(url)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][0] == "query"
