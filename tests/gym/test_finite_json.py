"""The checks a reader of files into the log makes (ledger/gym/finite_json.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledger.gym.finite_json import holds_nul, loads_finite


@pytest.mark.parametrize(
    ("value", "held"),
    [
        ({"a": "plain", "b": [1, 2.5, None, True]}, False),
        ({"a": "x\x00y"}, True),
        ({"k\x00": 1}, True),
        ([[[{"deep": ["", "\x00"]}]]], True),
        ("\x00", True),
        ({"escaped backslash": "\\u0000"}, False),
        ([], False),
    ],
)
def test_holds_nul_finds_a_nul_in_any_string(value: Any, held: bool) -> None:
    assert holds_nul(value) is held
    assert holds_nul(json.loads(json.dumps(value))) is held


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', "1e999"])
def test_loads_finite_refuses_what_is_not_a_finite_number(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not JSON|beyond the range of a float"):
        loads_finite(text)
