"""The log's signed head and inclusion proofs (log/checkpoints.py, log/proofs.py)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path

from ledger.app.http.auth import ReadAuth
from ledger.app.http.deps import MAX_SEQ, LedgerDep
from ledger.app.http.openapi import error_responses
from ledger.log.checkpoint_publisher import CheckpointPublisher
from ledger.log.checkpoints import Checkpoint, key_id, public_key_text
from ledger.log.errors import Conflict, NotFound
from ledger.log.proofs import MAX_PROOF_EVENTS, inclusion_proof
from ledger.log.witness import earliest_covering

router = APIRouter(prefix="/v1", tags=["checkpoints"])


def _publisher(publisher: CheckpointPublisher | None) -> CheckpointPublisher:
    if publisher is None:
        raise NotFound(
            "this server publishes no checkpoints (it serves read-only, or "
            "LEDGER_CHECKPOINTS_ENABLED is false)"
        )
    return publisher


def _signed(checkpoint: Checkpoint, publisher: CheckpointPublisher) -> dict[str, Any]:
    return {
        "checkpoint": checkpoint.as_dict(),
        "public_key": public_key_text(publisher.public_key),
    }


@router.get("/checkpoints/latest", responses=error_responses(404))
async def latest_checkpoint(ledger: LedgerDep, _auth: ReadAuth) -> dict[str, Any]:
    """The last signed checkpoint of the log's head and the public key that checks it: keep a
    copy (a trainer beside its manifest) and ``ledger verify --checkpoint FILE`` later shows
    whether the log still holds what it held then."""
    publisher = _publisher(ledger.checkpoints)
    checkpoint = publisher.latest or await publisher.publish()
    if checkpoint is None:
        raise NotFound("the log is empty: there is no head to sign yet")
    return _signed(checkpoint, publisher)


@router.get("/events/{seq}/proof", responses=error_responses(404, 409))
async def event_proof(
    ledger: LedgerDep, _auth: ReadAuth, seq: Annotated[int, Path(ge=1, le=MAX_SEQ)]
) -> dict[str, Any]:
    """The event at ``seq``, the chain from it to a signed checkpoint, the checkpoint and the
    public key: enough for a third party to check that the event is in the ledger."""
    publisher = _publisher(ledger.checkpoints)
    head = await ledger.store.head_seq()
    if seq > head:
        raise NotFound(f"no event at seq {seq}: the log ends at seq {head}")
    signer = key_id(publisher.public_key)
    checkpoint = await asyncio.to_thread(
        earliest_covering, ledger.settings.witness_files[0], seq, signer
    )
    if checkpoint is None:
        # Newer than the last checkpoint: sign the head now rather than make the caller wait.
        checkpoint = await publisher.publish()
    if checkpoint is None or checkpoint.seq < seq:
        raise Conflict(f"no checkpoint covers seq {seq} yet; retry")
    if checkpoint.seq - seq >= MAX_PROOF_EVENTS:
        raise Conflict(
            f"the first checkpoint after seq {seq} is at seq {checkpoint.seq}: a proof spans at "
            f"most {MAX_PROOF_EVENTS} events"
        )
    proof = await ledger.store.read_sync(lambda conn: inclusion_proof(conn, seq, checkpoint))
    return {**proof, "public_key": public_key_text(publisher.public_key)}
