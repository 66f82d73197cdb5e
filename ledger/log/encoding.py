"""A payload body in its stored form, computed once.

``WriteTransaction.append`` stores and hashes ``text``; a caller that already needs the digest
(a capture's ``payload_sha256`` is its identity) encodes the body here, outside the writer, and
hands the result to ``append``, so the single writer thread does not encode it a second time.
This is the one place a payload body becomes its stored text and digest: both paths go through
it, so the bytes are the same by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.log.canonical import canonical_bytes, sha256_hex, standard_bytes


@dataclass(frozen=True)
class EncodedPayload:
    """``body`` (the JSON-ready dict projectors see), its canonical JSON ``text`` (what the
    event row keeps), the SHA-256 of its UTF-8 bytes and their length."""

    body: dict[str, Any]
    text: str
    sha256: str
    size: int


def encode_body(body: dict[str, Any]) -> EncodedPayload:
    """``NotStorable`` (a ValueError) for a lone surrogate. ``body`` holds no NaN or Infinity:
    the boundary that took it refused them (canonical.py, scheme 2)."""
    data = canonical_bytes(body)
    return EncodedPayload(body=body, text=data.decode(), sha256=sha256_hex(data), size=len(data))


def holds_same_payload(stored_sha256: str | None, encoded: EncodedPayload) -> bool:
    """Whether an event stored with ``stored_sha256`` holds the payload ``encoded``. An event
    stored before revision 0020 has the hash of its scheme 1 bytes, which spell a float below
    1e-4 otherwise than ``encoded`` (canonical.py): a repeat sent across the upgrade is the
    same payload. The scheme 1 hash is computed only when the hashes differ."""
    if stored_sha256 == encoded.sha256:
        return True
    try:
        return stored_sha256 == sha256_hex(standard_bytes(encoded.body))
    except ValueError:
        return False
