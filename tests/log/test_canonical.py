"""The payload schemes write the bytes they say, and what they wrote reads back as the same bytes.

Scheme 1 (``standard_json``) is defined by the standard library; scheme 2 (``canonical_bytes``,
every event written since revision 0020) by orjson's sorted-key output. ``verify`` relies on
each scheme writing the value it reads back from its own bytes as the same bytes, which these
check on generated values full of the cases where the two spell floats differently. The chain
of a fixed series of appends is pinned twice: the events the code before orjson wrote
(``v1_events.json``: they must still verify, tests/log/test_payload_schemes.py) and the chain
this code writes (chain_pins.py).
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest

import ledger.log.transaction as transaction
from ledger.log.canonical import (
    ORJSON,
    STANDARD,
    NotStorable,
    canonical_bytes,
    compact_json,
    parse_json,
    scheme_bytes,
    standard_json,
)
from ledger.log.store import LedgerStore
from tests.log.chain_pins import PINNED, fixed_clock, scenario
from tests.support.json_values import generated


def stdlib_canonical(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def test_each_scheme_writes_what_it_says_and_reads_back_the_same_bytes() -> None:
    rng = random.Random(20261201)
    differ = 0
    for _ in range(5000):
        value = generated(rng)
        standard = stdlib_canonical(value)
        assert standard_json(value) == standard
        assert scheme_bytes(value, STANDARD) == standard.encode()
        try:
            expected = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # beyond orjson (an integer over 64 bits): scheme 1
            expected = standard.encode()
        assert canonical_bytes(value) == scheme_bytes(value, ORJSON) == expected
        differ += expected != standard.encode()
        for scheme in (STANDARD, ORJSON):
            written = scheme_bytes(value, scheme)
            assert scheme_bytes(parse_json(written), scheme) == written
            assert scheme_bytes(parse_json(written.decode()), scheme) == written
        assert compact_json(value) == json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        assert parse_json(standard) == json.loads(standard)
        assert repr(parse_json(standard.encode())) == repr(json.loads(standard))
    # The generated values do reach the floats the two schemes spell differently.
    assert differ > 100, differ


def test_the_schemes_differ_only_in_the_spelling_of_floats() -> None:
    value = {"b": [1e-05, -0.0, 1e16, 0.5], "a": "ü", "n": 2**63 - 1}
    assert standard_json(value) == '{"a":"ü","b":[1e-05,-0.0,1e+16,0.5],"n":9223372036854775807}'
    assert (
        canonical_bytes(value)
        == '{"a":"ü","b":[0.00001,-0.0,1e+16,0.5],"n":9223372036854775807}'.encode()
    )
    # An integer beyond 64 bits is written by scheme 1 whole, floats included.
    wide = {"n": 2**64, "f": 1e-05}
    assert (
        canonical_bytes(wide)
        == standard_json(wide).encode()
        == b'{"f":1e-05,"n":18446744073709551616}'
    )


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {"a": [float("-inf")]}])
def test_non_finite_numbers_are_refused_by_scheme_1_and_kept_by_compact_json(value: Any) -> None:
    """Scheme 2 does not look for them (orjson writes null): the boundaries refuse them
    (tests/captures/test_capture_api.py, tests/api/test_json_body.py)."""
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        standard_json(value)
    assert compact_json(value, allow_nan=True) == json.dumps(value, separators=(",", ":"))


def test_a_lone_surrogate_is_not_storable() -> None:
    with pytest.raises(NotStorable, match="lone surrogate"):
        canonical_bytes({"text": "a\ud800"})


def test_non_str_keys_and_subclasses_are_written_by_the_standard_library() -> None:
    class Text(str):
        pass

    value = {1: "one", "b": Text("x"), "a": [True, None]}
    assert standard_json({"z": Text("x"), "a": 1}) == stdlib_canonical({"z": "x", "a": 1})
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    "text",
    [
        "[18446744073709551616, -9223372036854775809, 123456789012345678901234567890]",
        '{"a": 1e400, "b": -1e400}',
        '["\\ud800", NaN, Infinity]',
        '{"a": 1, "a": 2}',
        "[-0.0, 0.0, 1e-7, 1E5]",
        # The long-integer guard looks at the UTF-8 bytes: text around the digits, a lone
        # surrogate in the text itself (not escaped), 18 digits (orjson's own reading).
        '{"ü 𝄞": [-123456789012345678901, "x"]}',
        '["\ud800 raw", 18446744073709551616]',
        "[123456789012345678, -12345678901234567]",
    ],
)
def test_parse_json_reads_what_orjson_would_read_differently(text: str) -> None:
    assert repr(parse_json(text)) == repr(json.loads(text))


async def test_the_chain_is_the_one_this_code_wrote_when_pinned(
    store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = fixed_clock()
    monkeypatch.setattr(transaction, "_now", lambda: next(clock))
    assert await scenario(store) == PINNED
