"""The hash chain: hash = SHA-256(prev_hash ‖ canonical header ‖ payload_sha256).

All three parts are fed as bytes: ``prev_hash`` and ``payload_sha256`` as their 32 raw bytes, the
header as the canonical JSON (UTF-8) of the event's envelope. The first event's prev_hash is 32
zero bytes. Redacting a payload (compaction) keeps ``payload_sha256``, so the chain still verifies.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from json.encoder import encode_basestring as _json_string

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
    """``standard_json`` of the envelope (sorted keys), written out directly: it runs for
    every append and costs a third of a general ``json.dumps`` this way. A test checks it
    against ``standard_json`` byte for byte."""
    return (
        f'{{"generation":{int(generation)},'
        f'"idempotency_key":{_json_or_null(idempotency_key)},'
        f'"kind":{_json_string(kind)},'
        f'"recorded_at":"{format_recorded_at(recorded_at)}",'
        f'"rollout_id":{_json_or_null(rollout_id)},'
        f'"schema_version":{int(schema_version)},'
        f'"seq":{int(seq)}}}'
    ).encode()


def _json_or_null(value: str | None) -> str:
    return "null" if value is None else _json_string(value)


def chain_hash(prev_hash: str, header: bytes, payload_sha256: str) -> str:
    digest = hashlib.sha256()
    digest.update(bytes.fromhex(prev_hash))
    digest.update(header)
    digest.update(bytes.fromhex(payload_sha256))
    return digest.hexdigest()
