"""The hash chain: hash = SHA-256(prev_hash ‖ canonical header ‖ payload_sha256).

All three parts are fed as bytes: ``prev_hash`` and ``payload_sha256`` as their 32 raw bytes, the
header as the canonical JSON (UTF-8) of the event's envelope. The first event's prev_hash is 32
zero bytes. Redacting a payload (compaction) keeps ``payload_sha256``, so the chain still verifies.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from ledger.canonical import canonical_json

GENESIS_HASH = "00" * 32


def format_recorded_at(value: datetime) -> str:
    """The one textual form of ``recorded_at`` that enters the hash (UTC, microseconds)."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical_header(
    *,
    seq: int,
    recorded_at: datetime,
    kind: str,
    schema_version: int,
    rollout_id: str | None,
    generation: int,
    idempotency_key: str | None,
) -> bytes:
    return canonical_json(
        {
            "generation": generation,
            "idempotency_key": idempotency_key,
            "kind": kind,
            "recorded_at": format_recorded_at(recorded_at),
            "rollout_id": rollout_id,
            "schema_version": schema_version,
            "seq": seq,
        }
    ).encode()


def chain_hash(prev_hash: str, header: bytes, payload_sha256: str) -> str:
    digest = hashlib.sha256()
    digest.update(bytes.fromhex(prev_hash))
    digest.update(header)
    digest.update(bytes.fromhex(payload_sha256))
    return digest.hexdigest()
