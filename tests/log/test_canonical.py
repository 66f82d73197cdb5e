"""orjson on the hot paths writes exactly the standard library's bytes, and reads its values.

The canonical form is defined by ``json.dumps`` (canonical.py); these compare the fast paths
with it on generated values full of the cases where orjson differs, and check that the chain
of a fixed series of appends is the one the code before orjson wrote (chain_pins.py).
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

import ledger.log.transaction as transaction
from ledger.log.canonical import (
    NotStorable,
    canonical_bytes,
    canonical_json,
    compact_json,
    parse_json,
)
from ledger.log.store import LedgerStore
from tests.log.chain_pins import PINNED, fixed_clock, scenario

FLOATS = [
    0.0, -0.0, 1e-4, 9.99e-5, 1e-7, 5e-324, 1e16, 9999999999999998.0, 1e22, 1.5e300,
    1250.5, 80.0, -3.25, 0.1, 1 / 3, 123456789.123, 2.0**53, -1e-5,
]  # fmt: skip
INTS = [0, -1, 7, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64, 2**70, -(2**70)]
TEXTS = ["", "a", "ünï ☃ \u2028 𝄞", 'q " \\ \n \t \x00 \x1f \x7f', "</script>", "\ufffe"]
KEYS = ["a", "b", "B", "é", "Z", "𝄞", "\x00", "aa", "model_call_id", "ü"]


def generated(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(9 if depth < 4 else 5)
    if choice == 0:
        number = rng.choice(FLOATS) * rng.choice([1, -1, 10.0 ** rng.randint(-12, 12)])
        return number if math.isfinite(number) else -0.0
    if choice == 1:
        return rng.choice(INTS)
    if choice == 2:
        return rng.choice(TEXTS)
    if choice == 3:
        return rng.choice([None, True, False])
    if choice == 4:
        return rng.uniform(-1e6, 1e6)
    if choice in (5, 6):
        return {rng.choice(KEYS): generated(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    return [generated(rng, depth + 1) for _ in range(rng.randint(0, 5))]


def stdlib_canonical(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def test_generated_values_encode_as_the_standard_library_writes_them() -> None:
    rng = random.Random(20261201)
    for _ in range(5000):
        value = generated(rng)
        expected = stdlib_canonical(value)
        assert canonical_json(value) == expected
        assert canonical_bytes(value) == expected.encode()
        assert compact_json(value) == json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        assert parse_json(expected) == json.loads(expected)
        assert repr(parse_json(expected.encode())) == repr(json.loads(expected))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {"a": [float("-inf")]}])
def test_non_finite_numbers_are_refused_like_the_standard_library(value: Any) -> None:
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        canonical_bytes(value)
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        canonical_json(value)
    assert compact_json(value, allow_nan=True) == json.dumps(value, separators=(",", ":"))


def test_a_lone_surrogate_is_not_storable() -> None:
    with pytest.raises(NotStorable, match="lone surrogate"):
        canonical_bytes({"text": "a\ud800"})


def test_non_str_keys_and_subclasses_are_written_by_the_standard_library() -> None:
    class Text(str):
        pass

    value = {1: "one", "b": Text("x"), "a": [True, None]}
    assert canonical_json({"z": Text("x"), "a": 1}) == stdlib_canonical({"z": "x", "a": 1})
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


async def test_the_chain_is_the_one_the_code_before_orjson_wrote(
    store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = fixed_clock()
    monkeypatch.setattr(transaction, "_now", lambda: next(clock))
    assert await scenario(store) == PINNED
