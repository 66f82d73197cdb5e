"""Gym 0.7.0 commits as its external-staging writer builds them: a root call and its child."""

from __future__ import annotations

import hashlib
from typing import Any

from nemo_gym.token_id_capture import CallRecord, CaptureLedgerCommit
from nemo_gym.token_id_capture.fingerprint import FINGERPRINT_VERSION


def hex64(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str, item_id: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": item_id,
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def commit(
    rollout_id: str,
    call: str,
    request_items: list[dict[str, Any]],
    answer: str,
    *,
    parent: CaptureLedgerCommit | None = None,
    delta_len: int = 3,
    response_id: str | None = None,
) -> CaptureLedgerCommit:
    """One committed call; a child continues ``parent`` (prev_len = the parent's cum_len)."""
    prev_len = parent.record.cum_len if parent is not None else 0
    key = f"{rollout_id}/{call}"
    record = CallRecord(
        model_call_id=call,
        parent_call_id=parent.record.model_call_id if parent is not None else None,
        prev_len=prev_len,
        delta_len=delta_len,
        cum_len=prev_len + delta_len,
        weight_version=0,
        digest=hex64(f"staging:{key}"),
        extras_digest=hex64("extras"),
        staging_key=key,
        mode="token_in" if parent is not None else "text",
        chain_hash=hex64(f"chain:{key}"),
        cumulative_hash=hex64(f"cumulative:{key}:{answer}"),
        response_id=response_id or f"resp-{call}",
        admitted_at=1755600000.25,
        fingerprint_version=FINGERPRINT_VERSION,
    )
    chain = (parent.staging_chain if parent is not None else ()) + (key,)
    return CaptureLedgerCommit(
        rollout_id=rollout_id,
        record=record,
        staging_chain=chain,
        request_items=request_items,
        response_items=[assistant(answer, f"msg-{call}")],
    )


def conversation_after(last: CaptureLedgerCommit, follow_up: str) -> list[dict[str, Any]]:
    """The next request of the harness: everything so far plus a new user turn."""
    return [*last.request_items, *last.response_items, user(follow_up)]
