"""Canonical JSON: the one byte form that is stored and hashed."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept, NaN/Infinity refused (they are not JSON)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def compact_json(value: Any) -> str:
    """Compact JSON that keeps key order (Gym's order is part of what readers see); not
    canonical, so never hashed."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class NotStorable(ValueError):
    """Text that JSON can spell but Unicode cannot hold (a lone UTF-16 surrogate); a ValueError
    of its own so callers can tell it from NaN/Infinity, which ``canonical_json`` refuses."""


def storable_utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; NotStorable for what JSON can spell but Unicode cannot hold (a
    lone UTF-16 surrogate such as ``"\\ud800"``), which no database stores."""
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise NotStorable(f"not valid Unicode: a lone surrogate at position {exc.start}") from None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
