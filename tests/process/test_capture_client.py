"""The async capture client against a real ``ledger serve`` process."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.areas.captures.client import CaptureClient, CaptureClientError
from ledger.gym.model_calls import aggregate_model_call_records, build_model_call_record
from ledger.log import migrate
from tests.support.exchanges import chat_exchange, failed_exchange, messages_exchange
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


async def test_client_round_trip_against_a_server_process(
    database_url: str, tmp_path: Path
) -> None:
    await migrate.upgrade(database_url)
    (tmp_path / "data").mkdir()
    exchanges = [chat_exchange(), messages_exchange(), failed_exchange()]
    with ServerProcess(data_dir=tmp_path / "data", database_url=database_url) as server:
        async with CaptureClient(server.base_url) as captures:
            first = await captures.append_model_call("r1", exchanges[0])
            assert first["call_index"] == 0
            assert await captures.append_model_call("r1", exchanges[0]) == first
            results = await captures.append_model_calls(
                [("r1", exchanges[1]), ("r1", exchanges[2]), ("bad id", exchanges[0])]
            )
            assert [r["status"] for r in results] == [201, 201, 400]
            records = await captures.read_model_call_records("r1")
            expected = [build_model_call_record(e, i) for i, e in enumerate(exchanges)]
            assert records == expected
            assert await captures.aggregate_model_call_metrics(
                "r1"
            ) == aggregate_model_call_records(expected)
            await captures.announce_pending_model_call("r1", "later")
            await captures.mark_capture_incomplete("r1")
            attachment = await captures.ng_model_call_capture("r1")
            assert [g["code"] for g in attachment["gaps"]] == [
                "model_call_capture_incomplete",
                "model_call_capture_pending",
            ]
            await captures.withdraw_pending_model_call("r1", "later")
            assert await captures.clear_model_calls("r1") is True
            assert await captures.read_model_call_records("r1") == []
            await captures.append_model_call("r2", exchanges[0])
            with pytest.raises(CaptureClientError) as conflict:
                await captures.append_model_call("r2", {**exchanges[0], "status_code": 500})
            assert conflict.value.status_code == 409
            with pytest.raises(ValueError, match="Invalid rollout id"):
                await captures.ng_model_call_capture("../etc")
