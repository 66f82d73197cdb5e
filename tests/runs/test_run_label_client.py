"""The capture client's ``run`` against a real ``ledger serve`` process: single and batched
appends label their rollouts, a second run is a 409, and ``/v1/health?run=`` selects them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ledger.areas.captures.client import CaptureClient, CaptureClientError
from ledger.log import migrate
from tests.support.exchanges import chat_exchange
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


async def test_the_client_labels_rollouts(database_url: str, tmp_path: Path) -> None:
    await migrate.upgrade(database_url)
    (tmp_path / "data").mkdir()
    with ServerProcess(data_dir=tmp_path / "data", database_url=database_url) as server:
        async with CaptureClient(server.base_url) as captures:
            await captures.append_model_call("r1", chat_exchange(model_call_id="c1"), run="run-a")
            results = await captures.append_model_calls(
                [("r2", chat_exchange(model_call_id="c2")), ("r1", chat_exchange())],
                run="run-a",
            )
            assert [r["status"] for r in results] == [201, 201]
            last = await captures.append_model_call("r3", chat_exchange(model_call_id="c3"))
            with pytest.raises(CaptureClientError) as refused:
                await captures.append_model_call("r1", chat_exchange(), run="run-b")
            assert refused.value.status_code == 409
            with pytest.raises(CaptureClientError) as invalid:
                await captures.append_model_call("r1", chat_exchange(), run="a b")
            assert invalid.value.status_code == 422
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            # A run-level read answers from the views; min_seq waits for them to hold r3.
            answer = await http.get(
                "/v1/health", params={"run": "run-a", "attempts": "all", "min_seq": last["seq"]}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["selection"]["matched"] == 2
