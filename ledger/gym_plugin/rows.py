"""Between Gym 0.7.0's values and the contract's ledger row (gym-contract.md §3.3).

Gym's ``CaptureLedgerCommit`` carries a ``CallRecord`` plus the request and response items; the
ledger stores the contract's row, which adds the lineage columns the matcher needs
(``fingerprint``, ``context_len``, ``context_digest``, ``digest``) and renames the record's
``digest`` to ``staging_digest``. The hashes are Gym's own functions, never ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nemo_gym.token_id_capture.fingerprint import (
    FINGERPRINT_VERSION,
    assistant_fingerprint,
    conversation_digest,
)
from nemo_gym.token_id_capture.lineage import LineageNode, RolloutLineage


def commit_row(commit: Any) -> dict[str, Any]:
    """The contract row for one ``CaptureLedgerCommit`` (every column, nulls kept)."""
    record = commit.record
    request_items = list(commit.request_items)
    return {
        "model_call_id": record.model_call_id,
        "fingerprint": assistant_fingerprint(request_items + list(commit.response_items)),
        "context_len": len(request_items),
        "context_digest": conversation_digest(request_items),
        # The lineage digest is the whole-sequence hash; the staged record's own digest is
        # kept as staging_digest (the manifest gives it back as CallRecord.digest).
        "digest": record.cumulative_hash,
        "parent_call_id": record.parent_call_id,
        "staging_key": record.staging_key,
        "weight_version": record.weight_version,
        "prev_len": record.prev_len,
        "delta_len": record.delta_len,
        "cum_len": record.cum_len,
        "staging_digest": record.digest,
        "extras_digest": record.extras_digest,
        "mode": record.mode,
        "admitted_at": record.admitted_at,
        "staging_chain": list(commit.staging_chain),
        "chain_hash": record.chain_hash,
        "cumulative_hash": record.cumulative_hash,
        "response_id": record.response_id,
        # Gym stores an empty fingerprint as null; so does the row.
        "output_fingerprint": record.output_fingerprint or None,
        "continuation_fingerprint": record.continuation_fingerprint or None,
        "fingerprint_version": record.fingerprint_version,
    }


def _node(row: Mapping[str, Any]) -> LineageNode | None:
    """A token-free node of Gym's matcher for one committed row; None if it cannot resolve."""
    if row.get("fingerprint_version") != FINGERPRINT_VERSION:
        return None  # another fingerprint algorithm (or none): matching it would be luck
    context_digest = row.get("context_digest")
    context_len = row.get("context_len")
    if not isinstance(context_digest, str) or not isinstance(context_len, int):
        return None
    cum_len = row.get("cum_len")
    return LineageNode(
        call_id=str(row["model_call_id"]),
        cum_tokens=[],  # token-free: the worker holds the tokens behind the staging chain
        cum_len=cum_len if isinstance(cum_len, int) else 0,
        digest=str(row.get("digest") or ""),
        context_len=context_len,
        context_digest=context_digest,
        parent_call_id=row.get("parent_call_id"),
        staging_key=str(row.get("staging_key") or ""),
        staging_chain=list(row.get("staging_chain") or []),
        chain_hash=str(row.get("chain_hash") or ""),
    )


def lineage_of(rows: Iterable[Mapping[str, Any]]) -> RolloutLineage:
    """Gym's ``RolloutLineage`` matcher over committed rows (those sharing one fingerprint).

    The rows already carry the fingerprint and context digest Gym computed when they were
    recorded, so nodes go straight into the matcher's indexes instead of through
    ``RolloutLineage.record`` (which would need the original items to hash again)."""
    lineage = RolloutLineage()
    for row in rows:
        node = _node(row)
        fingerprint = row.get("fingerprint")
        if node is None or not isinstance(fingerprint, str) or not fingerprint:
            continue
        if node.call_id in lineage.by_call_id:
            continue  # one row per call id in a generation; a repeat adds no candidate
        lineage.by_call_id[node.call_id] = node
        lineage.by_fingerprint.setdefault(fingerprint, []).append(node.call_id)
    return lineage
