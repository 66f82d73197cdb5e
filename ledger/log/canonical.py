"""Canonical JSON: the byte forms that are stored and hashed, by scheme.

An event's payload is stored as the bytes its chain hash covers, so which bytes a value
becomes is part of the log's format. Two schemes have written events:

- ``STANDARD`` (scheme 1, the events written before revision 0020; log/payload_schemes.py
  keeps which): what the standard library writes, ``json.dumps(value, sort_keys=True,
  separators=(",", ":"), ensure_ascii=False, allow_nan=False)`` as UTF-8.
- ``ORJSON`` (scheme 2, every event appended since): ``orjson.dumps(value,
  option=OPT_SORT_KEYS)``. It differs from scheme 1 only in the spelling of some floats below
  1e-4 (``0.00001`` and ``1e-7`` where the standard library writes ``1e-05`` and ``1e-07``;
  the orjson release pinned in pyproject.toml decides, which is why the scheme is named); a
  value orjson refuses (an integer beyond 64 bits, a lone surrogate) is written as scheme 1
  writes it, which is still a function of the value alone. NaN and Infinity are not JSON:
  every boundary that takes a payload refuses them before it is encoded (orjson would write
  them as ``null``), so this scheme does not look for them.

``ledger verify`` parses each stored payload and checks that its scheme writes the same bytes
again. Hashes that must not change with the scheme (a lineage row's identity, Gym's documents)
use ``standard_json``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

STANDARD = 1
ORJSON = 2

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
# The float range in which orjson's shortest round-trip spelling is Python's ``repr``.
_FLOAT_LOW = 1e-4
_FLOAT_HIGH = 1e16


def _orjson_writes_it_the_same(value: Any) -> bool:
    """True when every leaf of ``value`` is one orjson spells exactly as ``json.dumps``."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)  # exact types: a subclass (an enum, a str subclass) goes to stdlib
        if kind is str or kind is bool or item is None:
            continue
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            extend(item.values())
        elif kind is list:
            extend(item)
        elif kind is int:
            if not _INT64_MIN <= item <= _INT64_MAX:
                return False
        elif kind is float:
            magnitude = item if item > 0 else -item
            # NaN fails every comparison; 0.0 passes, -0.0 does not (its repr starts with "-").
            if not _FLOAT_LOW <= magnitude < _FLOAT_HIGH and not (
                item == 0.0 and repr(item) == "0.0"
            ):
                return False
        else:
            return False
    return True


def _stdlib(value: Any, *, sort_keys: bool, allow_nan: bool) -> str:
    return json.dumps(
        value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan
    )


def canonical_bytes(value: Any) -> bytes:
    """An event payload's bytes by the current scheme (``ORJSON``). ``NotStorable`` (a
    ValueError) for text UTF-8 cannot hold; ValueError for NaN/Infinity where the standard
    library writes the value (the boundaries refuse them before)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # e.g. an integer beyond 64 bits: scheme 1 writes it
        return standard_bytes(value)


def standard_json(value: Any) -> str:
    """Scheme 1: sorted keys, no spaces, UTF-8 kept, NaN/Infinity refused (they are not JSON),
    exactly as the standard library writes them."""
    return _stdlib(value, sort_keys=True, allow_nan=False)


def standard_bytes(value: Any) -> bytes:
    """Scheme 1's bytes: ``standard_json`` as UTF-8 (``NotStorable`` for a lone surrogate)."""
    return storable_utf8(standard_json(value))


def scheme_bytes(value: Any, scheme: int) -> bytes:
    """``value`` written by ``scheme`` (what ``verify`` compares a stored payload with)."""
    return canonical_bytes(value) if scheme == ORJSON else standard_bytes(value)


def is_plain_json(value: Any) -> bool:
    """True when every leaf of ``value`` is plain JSON that orjson and the standard library
    spell alike (str, bool, None, 64-bit ints, floats in [1e-4, 1e16) or 0.0; dicts with str
    keys; lists). Such a value is also one a pydantic JSON-mode dump leaves as it is."""
    return _orjson_writes_it_the_same(value)


def compact_json(value: Any, *, allow_nan: bool = False) -> str:
    """Compact JSON that keeps key order (Gym's order is part of what readers see), spelled as
    the standard library spells it; not canonical, so never hashed. ``allow_nan`` as in
    ``json.dumps``."""
    if _orjson_writes_it_the_same(value):
        try:
            return orjson.dumps(value).decode()
        except orjson.JSONEncodeError:  # e.g. a lone surrogate: the stdlib path says what
            pass
    return _stdlib(value, sort_keys=False, allow_nan=allow_nan)


# A run of 19 or more digits may be an integer orjson would parse as a float (it keeps 64 bits);
# a false alarm (digits inside a string) only costs the slower parser. JSON spells numbers in
# ASCII digits only, so the run is looked for in the UTF-8 bytes with every digit mapped to "0"
# and every other byte to a space: a C-speed translate and find, where a regular expression
# scanning for ``\d{19}`` cost several times the parse itself (``ledger verify`` parses every
# payload of the log).
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGITS = b"0" * 19


def _may_hold_a_long_integer(data: bytes) -> bool:
    return data.translate(_DIGITS_ONLY).find(_LONG_DIGITS) >= 0


def parse_json(text: str | bytes) -> Any:
    """``json.loads(text)``, by orjson where that gives the same value: never for text with a
    run of 19+ digits (orjson turns integers beyond 64 bits into floats), and the standard
    library for whatever orjson refuses (NaN, out-of-range numbers, lone surrogates)."""
    data = text.encode(errors="surrogatepass") if isinstance(text, str) else text
    if _may_hold_a_long_integer(data):
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


class NotStorable(ValueError):
    """Text that JSON can spell but Unicode cannot hold (a lone UTF-16 surrogate); a ValueError
    of its own so callers can tell it from NaN/Infinity, which ``standard_json`` refuses."""


def storable_utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; NotStorable for what JSON can spell but Unicode cannot hold (a
    lone UTF-16 surrogate such as ``"\\ud800"``), which no database stores."""
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise NotStorable(f"not valid Unicode: a lone surrogate at position {exc.start}") from None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
