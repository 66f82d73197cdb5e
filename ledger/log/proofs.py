"""Inclusion proofs: that one event is in the log a signed checkpoint names.

The chain itself is the proof: from the hash of the event before it, the event's header and
payload digest give its hash, and each following event's give the next, up to the checkpoint's
seq, whose hash the checkpoint signs. Anyone holding the proof and the ledger's public key checks
it without this code (docs/operations.md, "Inclusion proofs").
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, select

from ledger.log.chain import GENESIS_HASH
from ledger.log.checkpoints import Checkpoint
from ledger.log.tables import events
from ledger.log.verify import header_of

FORMAT = "rollout-ledger-inclusion-proof/1"
# A proof carries every event from the one proved to the checkpoint: checkpoints come every few
# seconds, so this is reached only after a burst larger than any interval's.
MAX_PROOF_EVENTS = 10_000


def inclusion_proof(conn: Connection, seq: int, checkpoint: Checkpoint) -> dict[str, Any]:
    """The proof that the event at ``seq`` (which the caller knows is in the log, at or before
    the checkpoint's seq) is in the log that ``checkpoint`` signs."""
    prev_hash = GENESIS_HASH
    if seq > 1:
        prev_hash = conn.execute(select(events.c.hash).where(events.c.seq == seq - 1)).scalar_one()
    rows = conn.execute(
        select(events)
        .where(events.c.seq >= seq, events.c.seq <= checkpoint.seq)
        .order_by(events.c.seq)
    ).all()
    chain = [
        {
            "header": json.loads(header_of(row)),
            "payload_sha256": row.payload_sha256,
            "hash": row.hash,
        }
        for row in rows
    ]
    return {
        "format": FORMAT,
        "seq": seq,
        "payload": rows[0].payload,
        "prev_hash": prev_hash,
        "events": chain,
        "checkpoint": checkpoint.as_dict(),
    }
