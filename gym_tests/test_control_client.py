"""Gym's own RolloutControlClient reads the manifest a real ledger serves, and gets 410 after
retire; Gym's wire models validate every manifest."""

from __future__ import annotations

import httpx
import pytest
from nemo_gym.token_id_capture.control_routes import RolloutControlClient
from nemo_gym.token_id_capture.staging.records import RolloutManifest

from tests.support.server import ServerProcess

DIGEST = "a" * 64


def row(model_call_id: str) -> dict[str, object]:
    """A committed row in the contract's column set (gym-contract.md §3.3)."""
    return {
        "model_call_id": model_call_id,
        "fingerprint": "c" * 64,
        "context_len": 1,
        "context_digest": "d" * 64,
        "parent_call_id": None,
        "staging_digest": "e" * 64,
        "admitted_at": 1755600000.25,
        "staging_chain": [f"7-0/{model_call_id}"],
        "output_fingerprint": None,
        "continuation_fingerprint": None,
        "prev_len": 0,
        "delta_len": 3,
        "cum_len": 3,
        "weight_version": 0,
        "digest": DIGEST,
        "extras_digest": DIGEST,
        "staging_key": f"7-0/{model_call_id}",
        "mode": "text",
        "chain_hash": DIGEST,
        "cumulative_hash": "b" * 64,
        "response_id": f"resp-{model_call_id}",
        "fingerprint_version": 2,
    }


async def test_gym_client_reads_the_manifest_then_gets_410(ledger_server: ServerProcess) -> None:
    base = ledger_server.base_url
    token = ledger_server.control_token
    async with httpx.AsyncClient(base_url=base) as http:
        for call in ("c1", "c2"):
            answer = await http.post("/v1/rollouts/7-0/ledger/rows", json=row(call))
            assert answer.status_code in (200, 201), answer.text
        failure = {"model_call_id": "c3", "failure_reason": "worker_capture_failed"}
        assert (await http.post("/v1/rollouts/7-0/ledger/rows", json=failure)).status_code in (
            200,
            201,
        )

        client = RolloutControlClient(base, auth_token=token, request_timeout_s=10)
        manifest = await client.manifest("7-0")
        assert isinstance(manifest, RolloutManifest)
        assert [r.model_call_id for r in manifest.records] == ["c1", "c2"]
        assert [(f.model_call_id, f.reason) for f in manifest.failures] == [
            ("c3", "worker_capture_failed")
        ]

        retired = await http.post(
            "/training-token-capture/control/rollouts/retire",
            json={"rollout_ids": ["7-0"]},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert retired.json() == {"removed": ["7-0"], "absent": []}

    with pytest.raises(RuntimeError, match="HTTP 410"):
        await client.manifest("7-0")


async def test_gym_client_is_refused_with_a_wrong_token(ledger_server: ServerProcess) -> None:
    client = RolloutControlClient(
        ledger_server.base_url, auth_token="not-the-token", request_timeout_s=10
    )
    with pytest.raises(RuntimeError, match="HTTP 401"):
        await client.manifest("7-0")
