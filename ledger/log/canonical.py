"""Canonical JSON: the one byte form that is stored and hashed.

The canonical form is, by definition, what the standard library writes:
``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
allow_nan=False)`` encoded as UTF-8. orjson writes the same bytes several times faster for the
values the ledger stores, but not for every value: it spells some floats differently (below
1e-4 today; 1e16 and above, and -0.0, in other releases), it writes NaN as ``null``, it refuses
integers beyond 64 bits and keys that are not strings, and its key order is not defined for
them. So a value goes to orjson only when ``_orjson_writes_it_the_same`` says every leaf is one
whose spelling both agree on (str, bool, None, 64-bit ints, floats in [1e-4, 1e16) or 0.0, dicts
with str keys, lists); anything else, and anything orjson refuses, is written by the standard
library exactly as before. tests/log/test_canonical.py compares both on generated values and
pins the hashes of events written before orjson was used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from typing import Any

import orjson

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


# What a caller says it has found plain already (``is_plain_json``), so it is not walked again:
# True for the whole value, or the keys of those members of a dict value. The walk costs several
# times orjson's own write, and a capture's payloads, most of its nodes, were walked four times
# (its NaN check, its canonical bytes, its trajectory entry, its stored call): now once. A claim
# that is wrong gives other bytes than the standard library's (orjson writes NaN as null), so
# only a caller that has just walked the value makes it.
Checked = bool | Collection[str]

_STR_ONLY = frozenset({str})


def _left_to_walk(value: Any, plain: Collection[str]) -> Any:
    """``value`` without its members under ``plain`` (a list of the others, walked as one
    value), or all of it when it is no dict with str keys (the walk then says what it says)."""
    if type(value) is not dict or not {*map(type, value)} <= _STR_ONLY:
        return value
    return [member for key, member in value.items() if key not in plain]


def _writes_alike(value: Any, plain: Checked) -> bool:
    if plain is True:
        return True
    if not plain:
        return _orjson_writes_it_the_same(value)
    return _orjson_writes_it_the_same(_left_to_walk(value, plain))


def _fast(value: Any, option: int, plain: Checked = False) -> bytes | None:
    if not _writes_alike(value, plain):
        return None
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError:  # e.g. a lone surrogate: the stdlib path says what is wrong
        return None


def canonical_bytes(value: Any, *, plain: Checked = False) -> bytes:
    """The UTF-8 bytes of ``canonical_json(value)``. ValueError for NaN/Infinity;
    ``NotStorable`` (a ValueError) for text UTF-8 cannot hold. ``plain``: what of ``value``
    the caller has found plain (``Checked``)."""
    fast = _fast(value, orjson.OPT_SORT_KEYS, plain)
    if fast is not None:
        return fast
    return storable_utf8(_stdlib(value, sort_keys=True, allow_nan=False))


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept, NaN/Infinity refused (they are not JSON)."""
    fast = _fast(value, orjson.OPT_SORT_KEYS)
    if fast is not None:
        return fast.decode()
    return _stdlib(value, sort_keys=True, allow_nan=False)


def is_plain_json(value: Any) -> bool:
    """True when every leaf of ``value`` is plain JSON that orjson and the standard library
    spell alike (str, bool, None, 64-bit ints, floats in [1e-4, 1e16) or 0.0; dicts with str
    keys; lists). Such a value is also one a pydantic JSON-mode dump leaves as it is."""
    return _orjson_writes_it_the_same(value)


def plain_compact_json(value: Any, *, plain: Checked = False) -> str | None:
    """``compact_json(value)`` when ``is_plain_json(value)``, else None; ``plain`` as in
    ``canonical_bytes``."""
    fast = _fast(value, 0, plain)
    return None if fast is None else fast.decode()


def compact_json(value: Any, *, allow_nan: bool = False, plain: Checked = False) -> str:
    """Compact JSON that keeps key order (Gym's order is part of what readers see); not
    canonical, so never hashed. ``allow_nan`` as in ``json.dumps``; ``plain`` as in
    ``canonical_bytes``."""
    fast = _fast(value, 0, plain)
    if fast is not None:
        return fast.decode()
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
