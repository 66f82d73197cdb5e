"""The body parser on its own: what it refuses, where it says the problem is, and the Python
scan it falls back on when orjson's serialisation limit is not what it expects."""

from __future__ import annotations

import json

import orjson
import pytest

from ledger.app.http import json_body
from ledger.app.http.json_body import parse_json
from ledger.log.errors import InvalidPayload

TOO_DEEP = "body.a.a.a.a.a.a.a.a: JSON nests deeper than the limit of 8 levels"


def deep(depth: int) -> bytes:
    return b'{"a":' * (depth - 1) + b"{}" + b"}" * (depth - 1)


def problems(raw: bytes, **options: object) -> list[str]:
    return [problem.describe() for problem in parse_json(raw, max_depth=8, **options).problems]  # type: ignore[arg-type]


def test_clean_bodies_have_no_problems() -> None:
    raw = json.dumps({"t": "10:30", "k:ey": [1, -(2**63), 2**63 - 1, 1.5e300], "s": "é"}).encode()
    body = parse_json(raw, max_depth=8)
    assert body.problems == []
    assert body.value["k:ey"][2] == 2**63 - 1


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"a": {"b": 1, "b": 2}}', ['body.a: duplicate key "b"']),
        (b'{"a": "x\\u003a", "a": 1}', ['body: duplicate key "a"']),
        (deep(9), [TOO_DEEP]),
        (
            b'{"n": [1, 18446744073709551616]}',
            ["body.n.1: integer outside the signed 64-bit range"],
        ),
        (b'{"n": 9223372036854775808}', ["body.n: integer outside the signed 64-bit range"]),
        (b'{"n": -9223372036854775809}', ["body.n: integer outside the signed 64-bit range"]),
        (b'{"s": "\\ud800"}', ["body.s: not valid Unicode (a lone surrogate)"]),
        (b'{"x": NaN}', ["body.x: NaN is not JSON (numbers must be finite)"]),
        # orjson reads a number beyond a float's range as infinity, as Python's json does.
        (
            b'{"s": "null", "x": [0.5, 1e999], "n": null}',
            ["body.x.1: 1e999 is beyond the range of a float (numbers must be finite)"],
        ),
        (
            b'{"x": -2E+400}',
            ["body.x: -2E+400 is beyond the range of a float (numbers must be finite)"],
        ),
        (
            b'{"s": ["ok", "a\\u0000b"]}',
            ["body.s.1: holds a NUL character (\\u0000), which the ledger does not store"],
        ),
        (
            b'{"k\\u0000": 1}',
            ["body.k\\u0000: holds a NUL character (\\u0000), which the ledger does not store"],
        ),
    ],
)
def test_problems_are_located(raw: bytes, expected: list[str]) -> None:
    assert problems(raw) == expected


def test_wide_integers_can_be_kept_exactly() -> None:
    body = parse_json(b'{"n": 18446744073709551616}', max_depth=8, wide_integers=True)
    assert body.problems == []
    assert body.value == {"n": 2**64}


def test_a_digit_run_in_a_string_is_only_a_false_alarm() -> None:
    body = parse_json(b'{"id": "12345678901234567890123"}', max_depth=8)
    assert body.problems == []


def test_an_escaped_backslash_before_u0000_is_only_a_false_alarm() -> None:
    body = parse_json(b'{"path": "C:\\\\u0000"}', max_depth=8)
    assert body.problems == []
    assert body.value == {"path": "C:\\u0000"}


def test_text_that_is_not_json_is_refused_whole() -> None:
    with pytest.raises(InvalidPayload, match="not valid JSON"):
        parse_json(b'{"a": ', max_depth=8)


def test_orjson_serialises_exactly_the_depth_the_fast_check_assumes() -> None:
    limit = json_body._dumps_depth_limit()
    assert limit is not None
    at_limit = orjson.loads(deep(limit))
    orjson.dumps(at_limit)
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps([at_limit])


def test_the_python_scan_finds_what_the_fast_check_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    json_body._dumps_depth_limit.cache_clear()
    monkeypatch.setattr(json_body, "_dumps_depth_limit", lambda: None)
    assert problems(b'{"a": {"b": 1, "b": 2}}') == ['body.a: duplicate key "b"']
    assert problems(deep(9)) == [TOO_DEEP]
    assert problems(deep(8)) == []
    assert problems(b'{"t": "a:b", "u": {"c:d": [":"]}}') == []
