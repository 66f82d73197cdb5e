"""Ledger rows for tests, shaped exactly like Gym's ``<id>.lineage.jsonl`` lines."""

from __future__ import annotations

import hashlib
from typing import Any


def hex64(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


def committed_row(
    rollout_id: str,
    model_call_id: str,
    *,
    parent: dict[str, Any] | None = None,
    delta_len: int = 10,
    **overrides: Any,
) -> dict[str, Any]:
    """A valid committed-call row: a text root, or a token_in child of ``parent``."""
    prev_len = 0 if parent is None else int(parent["cum_len"])
    chain = [] if parent is None else list(parent["staging_chain"])
    staging_key = f"{rollout_id}/{model_call_id}"
    cumulative = hex64(f"cum:{rollout_id}:{model_call_id}")
    row: dict[str, Any] = {
        "model_call_id": model_call_id,
        "fingerprint": hex64(f"fp:{rollout_id}:{model_call_id}"),
        "context_len": 1 + prev_len // 10,
        "context_digest": hex64(f"ctx:{rollout_id}:{model_call_id}"),
        "digest": cumulative,
        "parent_call_id": None if parent is None else parent["model_call_id"],
        "staging_key": staging_key,
        "weight_version": 17,
        "prev_len": prev_len,
        "delta_len": delta_len,
        "cum_len": prev_len + delta_len,
        "staging_digest": hex64(f"staging:{rollout_id}:{model_call_id}"),
        "extras_digest": hex64("extras:none"),
        "mode": "text" if parent is None else "token_in",
        "admitted_at": 1755600000.25,
        "staging_chain": [*chain, staging_key],
        "chain_hash": hex64(f"chain:{rollout_id}:{model_call_id}"),
        "cumulative_hash": cumulative,
        "response_id": f"chatcmpl-{model_call_id}",
        "output_fingerprint": None,
        "continuation_fingerprint": None,
        "fingerprint_version": 1,
    }
    row.update(overrides)
    return row


def failure_row(model_call_id: str, reason: str = "worker_capture_failed") -> dict[str, Any]:
    return {"failure_reason": reason, "model_call_id": model_call_id}


def manifest_record(row: dict[str, Any]) -> dict[str, Any]:
    """The CallRecord a committed row becomes in a manifest reply (wire order)."""
    return {
        "schema_version": 2,
        "digest_version": 2,
        "extras_digest_version": 1,
        "model_call_id": row["model_call_id"],
        "parent_call_id": row["parent_call_id"],
        "prev_len": row["prev_len"],
        "delta_len": row["delta_len"],
        "cum_len": row["cum_len"],
        "weight_version": row["weight_version"],
        "digest": row["staging_digest"],
        "extras_digest": row["extras_digest"],
        "staging_key": row["staging_key"],
        "mode": row["mode"],
        "chain_hash": row["chain_hash"],
        "cumulative_hash": row["cumulative_hash"],
        "response_id": row["response_id"],
        "admitted_at": row["admitted_at"],
        "output_fingerprint": row["output_fingerprint"] or None,
        "continuation_fingerprint": row["continuation_fingerprint"] or None,
        "fingerprint_version": row["fingerprint_version"] or 0,
    }


def legacy_rows(rollout_id: str) -> list[dict[str, Any]]:
    """c1 complete; c2 without response_id AND chain_hash (response_id is checked first);
    c3 without cumulative_hash; c4 without chain_hash."""
    rows = [committed_row(rollout_id, f"c{n}") for n in range(1, 5)]
    for row, missing in zip(
        rows[1:],
        (("response_id", "chain_hash"), ("cumulative_hash",), ("chain_hash",)),
        strict=True,
    ):
        for column in missing:
            del row[column]
    return rows
