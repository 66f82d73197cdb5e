"""orjson on the hot paths writes exactly the standard library's bytes, and reads its values.

The canonical form is defined by ``json.dumps`` (canonical.py); these compare the fast paths
with it on generated values full of the cases where orjson differs, and check that the chain
of a fixed series of appends is the one the code before orjson wrote (chain_pins.py).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import ledger.log.transaction as transaction
from ledger.log.canonical import (
    NotStorable,
    canonical_bytes,
    canonical_json,
    compact_json,
    is_plain_json,
    parse_json,
    plain_compact_json,
)
from ledger.log.store import LedgerStore
from tests.log.chain_pins import PINNED, fixed_clock, scenario
from tests.support.json_values import generated


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


def test_what_a_caller_found_plain_is_not_walked_and_the_rest_is() -> None:
    """``plain=True`` (all found plain) and ``plain=keys`` (those members of a dict) give the
    standard library's bytes whenever the claim is true, and the members left out of the claim
    are still walked: a float orjson spells otherwise there takes the standard library."""
    rng = random.Random(20261203)
    whole = partial = walked_members = 0
    for _ in range(3000):
        checked, other = generated(rng), generated(rng)
        value = {"checked": checked, "other": other}
        expected = stdlib_canonical(value)
        compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if is_plain_json(value):
            whole += 1
            assert canonical_bytes(value, plain=True) == expected.encode()
            assert compact_json(value, plain=True) == compact
            assert plain_compact_json(value, plain=True) == compact
        if is_plain_json(checked):
            partial += 1
            assert canonical_bytes(value, plain=("checked",)) == expected.encode()
            assert compact_json(value, plain=("checked",)) == compact
            if not is_plain_json(other):
                walked_members += 1
                assert plain_compact_json(value, plain=("checked",)) is None
    # Every kind of claim ran, and so did the walk of a member the claim left out.
    assert whole > 200 and partial > 500 and walked_members > 100, (whole, partial, walked_members)


def test_a_claim_on_members_of_a_dict_with_other_keys_takes_the_standard_library() -> None:
    value = {1: "one", "checked": {"a": 1}}
    assert compact_json(value, plain=("checked",)) == json.dumps(
        value, separators=(",", ":"), ensure_ascii=False
    )
    assert plain_compact_json(value, plain=("checked",)) is None


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
