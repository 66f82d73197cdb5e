"""Gym 0.7.0's own code as the reference for the ledger's conformance fixes (issue 10 §3):
capture gaps of a marker-only rollout, lineage rows of an older model server, and
conversations (Gym's input-item union; every served record validates as Gym's models)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from nemo_gym.base_responses_api_model import CaptureStore, merge_model_call_capture_into_record
from nemo_gym.openai_utils import NeMoGymResponseInputItem
from nemo_gym.rollout_observability import AgentObservationBundle, TrajectoryRecord
from nemo_gym.token_id_capture.lineage import FileLineageStore
from pydantic import TypeAdapter, ValidationError

from ledger.gym.response_items import MEMBER_TAGS, item_error
from tests.gym.response_item_cases import CASES
from tests.lineage.rows import legacy_rows
from tests.observations.support import EXAMPLE_OBSERVATIONS, feed_example
from tests.support.server import ServerProcess

GYM_ITEM: TypeAdapter[Any] = TypeAdapter(NeMoGymResponseInputItem)


def gym_accepts(item: Any) -> bool:
    try:
        GYM_ITEM.validate_python(item)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(("item", "accepted"), [pytest.param(i, a, id=n) for n, i, a in CASES])
def test_our_item_union_agrees_with_gyms(item: Any, accepted: bool) -> None:
    assert gym_accepts(item) is accepted
    assert (item_error(item) is None) is accepted


def test_our_union_has_gyms_members() -> None:
    members = get_args(get_args(NeMoGymResponseInputItem)[0])
    gym_tags = {
        meta.tag for member in members for meta in get_args(member)[1:] if hasattr(meta, "tag")
    }
    assert gym_tags == set(MEMBER_TAGS)


async def test_marker_only_rollout_gaps_equal_gyms_merge(
    ledger_server: ServerProcess, tmp_path: Path
) -> None:
    captures = CaptureStore(tmp_path / "captures")
    captures.mark_incomplete("3-0")
    gym = merge_model_call_capture_into_record(
        {"_ng_task_index": 3, "_ng_rollout_index": 0}, [captures.root]
    )["ng_model_call_capture"]
    assert gym["gaps"] == [{"code": "model_call_capture_incomplete"}]
    async with httpx.AsyncClient(base_url=ledger_server.base_url) as http:
        marked = await http.post("/v1/rollouts/3-0/model-calls/incomplete")
        assert marked.status_code == 201, marked.text
        ours = (await http.get("/v1/rollouts/3-0/ng_model_call_capture")).json()
    assert ours["gaps"] == gym["gaps"]
    assert ours["calls"] == gym["calls"] == []


async def test_older_model_server_rows_give_gyms_manifest(
    ledger_server: ServerProcess, tmp_path: Path
) -> None:
    rows = legacy_rows("5-0")
    root = tmp_path / "gym-ledger"
    root.mkdir()
    text = "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in rows)
    (root / "5-0.lineage.jsonl").write_text(text)
    gym_manifest = await FileLineageStore(root).manifest("5-0")
    assert [f["reason"] for f in gym_manifest["failures"]] == [
        "ledger_row_missing_response_id",
        "ledger_row_missing_chain_hash",
        "ledger_row_missing_chain_hash",
    ]
    async with httpx.AsyncClient(base_url=ledger_server.base_url) as http:
        for row in rows:
            reply = await http.post("/v1/rollouts/5-0/ledger/rows", json=row)
            assert reply.status_code == 200, reply.text
        served = await http.get(
            "/training-token-capture/control/rollouts/5-0/manifest",
            headers={"Authorization": f"Bearer {ledger_server.control_token}"},
        )
    assert served.json() == gym_manifest


def rich_conversation() -> list[dict[str, Any]]:
    """Every accepted dict item of the corpus: what a harness may legitimately send."""
    return [item for _, item, accepted in CASES if accepted and isinstance(item, dict)]


async def test_served_records_validate_as_gyms_models(ledger_server: ServerProcess) -> None:
    bundle = json.loads(json.dumps(EXAMPLE_OBSERVATIONS))
    bundle["records"].append(
        {
            "kind": "agent_invocation",
            "invocation_id": "sub-rich",
            "parent_invocation_id": bundle["records"][0]["invocation_id"],
            "conversation": rich_conversation(),
        }
    )
    async with httpx.AsyncClient(base_url=ledger_server.base_url) as http:
        await feed_example(http, "0-0")
        reply = await http.post("/v1/rollouts/0-0/observations", json=bundle)
        assert reply.status_code in (200, 201), reply.text
        record = (await http.get("/v1/rollouts/0-0/record")).json()
        AgentObservationBundle.model_validate(record["ng_agent_observations"])
        trajectory = TrajectoryRecord.model_validate(record["ng_trajectory"])
        assert any(i.invocation_id == "sub-rich" for i in trajectory.invocations)
        served = (await http.get("/v1/rollouts/0-0/trajectory")).json()
        assert served == record["ng_trajectory"]
        TrajectoryRecord.model_validate(served)
        exported = (await http.get("/v1/rollouts/0-0/record", params={"view": "export"})).json()
        AgentObservationBundle.model_validate(exported["ng_agent_observations"])
        # What Gym's bundle refuses, the ledger refuses too, naming the item.
        bad = json.loads(json.dumps(bundle))
        bad["records"][-1]["conversation"].append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "4", "annotations": []}],
            }
        )
        with pytest.raises(ValidationError):
            AgentObservationBundle.model_validate(bad)
        refused = await http.post("/v1/rollouts/0-0/observations", json=bad)
    assert refused.status_code == 422
    index = len(rich_conversation())
    assert (
        f"conversation.{index}: not a Responses input item (read as output_message): id"
        in (refused.json()["detail"])
    )
