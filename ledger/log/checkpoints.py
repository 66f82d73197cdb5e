"""Signed checkpoints of the log's head: what a witness outside the database keeps.

A hash chain shows that nothing before its head was changed, but a prefix of a chain is a chain:
a log that lost its tail (a truncated WAL, a deleted last event) still verifies. A checkpoint
names the head at a moment (seq, chain hash, the log's epoch) and is signed with the ledger's
Ed25519 key, so a copy kept elsewhere proves later that the log once reached that seq with that
hash. The format is documented in docs/operations.md ("Checkpoints") so that anyone can check a
checkpoint without this code:

    message   = the canonical JSON (sorted keys, no spaces, UTF-8) of every field but "signature"
    signature = base64(Ed25519-sign(message))
    key_id    = hex(SHA-256(the 32 raw bytes of the public key))
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ledger.log.chain import format_recorded_at

FORMAT = "rollout-ledger-checkpoint/1"
_FIELDS = ("format", "seq", "hash", "log_epoch", "published_at", "key_id", "signature")
_HEX64 = frozenset("0123456789abcdef")


class MalformedCheckpoint(ValueError):
    """A checkpoint that is not in the documented format (its text says what is wrong)."""


def public_key_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    return hashlib.sha256(public_key_bytes(key)).hexdigest()


def public_key_text(key: Ed25519PublicKey) -> str:
    """The public key as published (``GET /v1/checkpoints/latest``): base64 of its raw bytes."""
    return base64.b64encode(public_key_bytes(key)).decode()


def public_key_from_text(text: str) -> Ed25519PublicKey:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise MalformedCheckpoint(f"not a base64 Ed25519 public key: {exc}") from None


def _canonical(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    hash: str
    log_epoch: str
    published_at: str
    key_id: str
    signature: str
    format: str = FORMAT

    def message(self) -> bytes:
        """The bytes the signature covers."""
        fields = asdict(self)
        del fields["signature"]
        return _canonical(fields)

    def signed_by(self, key: Ed25519PublicKey) -> bool:
        if self.key_id != key_id(key):
            return False
        try:
            key.verify(base64.b64decode(self.signature), self.message())
        except (InvalidSignature, ValueError):
            return False
        return True

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_line(self) -> bytes:
        return _canonical(self.as_dict()) + b"\n"


def sign_head(
    key: Ed25519PrivateKey, *, seq: int, chain_hash: str, log_epoch: str, at: datetime
) -> Checkpoint:
    unsigned = Checkpoint(
        seq=seq,
        hash=chain_hash,
        log_epoch=log_epoch,
        published_at=format_recorded_at(at),
        key_id=key_id(key.public_key()),
        signature="",
    )
    signature = base64.b64encode(key.sign(unsigned.message())).decode()
    return Checkpoint(**{**unsigned.as_dict(), "signature": signature})


def checkpoint_from_dict(value: object) -> Checkpoint:
    """Parse a checkpoint's fields (a witness line, a copy a trainer kept); the signature is
    checked apart (``signed_by``)."""
    if not isinstance(value, dict):
        raise MalformedCheckpoint("a checkpoint is a JSON object")
    missing = [name for name in _FIELDS if name not in value]
    if missing:
        raise MalformedCheckpoint(f"missing field {missing[0]!r}")
    unknown = sorted(set(value) - set(_FIELDS))
    if unknown:
        raise MalformedCheckpoint(f"unknown field {unknown[0]!r}")
    if value["format"] != FORMAT:
        raise MalformedCheckpoint(f"format {str(value['format'])[:40]!r} is not {FORMAT!r}")
    seq = value["seq"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise MalformedCheckpoint("seq must be a positive integer")
    for name in ("hash", "key_id"):
        text = value[name]
        if not isinstance(text, str) or len(text) != 64 or not set(text) <= _HEX64:
            raise MalformedCheckpoint(f"{name} must be 64 lowercase hex digits")
    for name in ("log_epoch", "published_at", "signature"):
        if not isinstance(value[name], str) or len(value[name]) > 200:
            raise MalformedCheckpoint(f"{name} must be a short string")
    return Checkpoint(**value)


def parse_checkpoint(line: bytes | str) -> Checkpoint:
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise MalformedCheckpoint(f"not JSON: {exc}") from None
    return checkpoint_from_dict(value)
