"""RolloutControlClient against the real app (in process) and against scripted servers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError

from ledger.areas.lineage.client import RolloutControlClient
from ledger.log.errors import RolloutRetiredError
from tests.lineage.rows import committed_row, manifest_record

Handler = Callable[[httpx.Request], httpx.Response]


def app_client(app: FastAPI, token: str = "control-secret") -> RolloutControlClient:
    return RolloutControlClient(
        "http://localhost/", token, 10.0, transport=httpx.ASGITransport(app=app)
    )


def scripted(handler: Handler, timeout: float = 5.0) -> RolloutControlClient:
    return RolloutControlClient(
        "http://gym.test", "tok", timeout, transport=httpx.MockTransport(handler)
    )


async def test_manifest_retire_delete_against_the_ledger(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    row = committed_row("r1", "c1")
    assert (await client.post("/v1/rollouts/r1/ledger/rows", json=row)).status_code == 200
    control = app_client(app)
    manifest = await control.manifest("r1")
    assert [r.model_dump(mode="json") for r in manifest.records] == [manifest_record(row)]
    retired = await control.retire(["r1", "r2", "r1"])
    assert (retired.removed, retired.absent) == (["r1"], ["r2"])
    with pytest.raises(RolloutRetiredError):
        await control.manifest("r1")
    deleted = await control.delete(["r1", "r2"])
    assert (deleted.removed, deleted.absent) == ([], ["r1", "r2"])
    assert (await control.manifest("r1")).records == []


async def test_wrong_token_is_a_runtime_error_naming_the_status(app: FastAPI) -> None:
    control = app_client(app, token="wrong")
    with pytest.raises(RuntimeError, match=r"^rollout r1 manifest fetch failed: HTTP 401 "):
        await control.manifest("r1")
    with pytest.raises(RuntimeError, match=r"^retire of 2 rollout ledgers failed: HTTP 401 "):
        await control.retire(["a", "b"])


def test_constructor_refuses_empty_token_and_bad_timeouts() -> None:
    with pytest.raises(ValueError, match="auth_token"):
        RolloutControlClient("http://x", "", 1.0)
    for timeout in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="request_timeout_s"):
            RolloutControlClient("http://x", "t", timeout)


async def test_ids_are_validated_before_anything_is_sent() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"removed": [], "absent": []})

    control = scripted(handler)
    with pytest.raises(ValueError, match=r"Invalid rollout id: '\.\./rollouts/r1'"):
        await control.manifest("../rollouts/r1")
    with pytest.raises(ValueError, match="Invalid rollout id: 'bad id'"):
        await control.retire(["ok", "bad id"])
    with pytest.raises(TypeError):
        await control.delete("r1")
    assert sent == []


async def test_batches_of_4096_in_order_with_whole_list_dedupe() -> None:
    bodies: list[list[str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        ids = json.loads(request.content)["rollout_ids"]
        bodies.append(ids)
        return httpx.Response(200, json={"removed": ids[:1], "absent": ids[1:]})

    ids = [f"r{i}" for i in range(9000)]
    result = await scripted(handler).retire([*ids, "r0", "r4096"])
    assert [len(b) for b in bodies] == [4096, 4096, 808]
    assert [i for b in bodies for i in b] == ids
    assert result.removed == ["r0", "r4096", "r8192"]
    assert len(result.absent) == 9000 - 3


async def test_empty_list_sends_nothing() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("nothing should be sent")

    result = await scripted(handler).delete([])
    assert (result.removed, result.absent) == ([], [])


@pytest.mark.parametrize(
    "reply",
    [
        {"removed": [], "absent": [], "extra": 1},
        {"removed": [], "absent": [], "schema_version": 1},
        {"removed": "r1", "absent": []},
        {"removed": [""], "absent": []},
    ],
)
async def test_removal_replies_are_validated_strictly(reply: dict[str, Any]) -> None:
    control = scripted(lambda _request: httpx.Response(200, json=reply))
    with pytest.raises(ValidationError):
        await control.retire(["r1"])


async def test_removal_reply_with_schema_version_2_is_accepted() -> None:
    reply = {"removed": ["r1"], "absent": [], "schema_version": 2}
    result = await scripted(lambda _request: httpx.Response(200, json=reply)).retire(["r1"])
    assert result.removed == ["r1"]


@pytest.mark.parametrize(
    "body",
    [
        {"schema_version": 2, "rollout_id": "r1", "records": [], "failures": [], "x": 1},
        {"schema_version": 1, "rollout_id": "r1", "records": [], "failures": []},
    ],
)
async def test_manifest_replies_are_validated_strictly(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        await scripted(lambda _request: httpx.Response(200, json=body)).manifest("r1")


async def test_manifest_for_another_rollout_is_refused() -> None:
    body = {"schema_version": 2, "rollout_id": "r2", "records": [], "failures": []}
    with pytest.raises(ValueError, match="'r2'"):
        await scripted(lambda _request: httpx.Response(200, json=body)).manifest("r1")


async def test_410_is_rollout_retired_error_and_500_is_runtime_error() -> None:
    gone = scripted(lambda _request: httpx.Response(410, json={"detail": "retired"}))
    with pytest.raises(RolloutRetiredError):
        await gone.manifest("r1")
    broken = scripted(lambda _request: httpx.Response(500, text="boom"))
    with pytest.raises(RuntimeError, match=r"^rollout r1 manifest fetch failed: HTTP 500 boom$"):
        await broken.manifest("r1")
    with pytest.raises(RuntimeError, match=r"^delete of 1 rollout ledgers failed: HTTP 500 boom$"):
        await broken.delete(["r1"])


async def test_timeouts_are_reported_as_such() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()  # never answers
        raise AssertionError

    class Stalled(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return await slow(request)

    control = RolloutControlClient("http://gym.test/", "tok", 0.05, transport=Stalled())
    with pytest.raises(
        RuntimeError,
        match=r"^ledger control request POST /training-token-capture/control/rollouts/retire "
        r"exceeded 0.05s$",
    ):
        await control.retire(["r1"])

    def raises_timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    with pytest.raises(RuntimeError, match=r"exceeded 5\.0s"):
        await scripted(raises_timeout).manifest("r1")


async def test_trailing_slash_is_stripped() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(
            200, json={"schema_version": 2, "rollout_id": "r1", "records": [], "failures": []}
        )

    control = RolloutControlClient(
        "http://gym.test/base/", "tok", transport=httpx.MockTransport(handler)
    )
    assert control.base_url == "http://gym.test/base"
    await control.manifest("r1")
    assert seen == ["http://gym.test/base/training-token-capture/control/rollouts/r1/manifest"]
