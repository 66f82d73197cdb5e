"""The one request-body parser of the JSON routes: parse once with orjson, check what orjson
does not, and say where the body is wrong.

What is refused (each a ``BodyProblem`` at a path, so a batch can fail only the item that holds
it): duplicate object keys, nesting deeper than the configured limit, lone UTF-16 surrogates,
NUL characters (``\u0000``: PostgreSQL's text cannot hold them, and both backends take the same
bodies), and integers outside the signed 64-bit range (unless the route keeps wide integers,
as a capture's opaque payload does). Refused whole before parsing: more strings or containers
than the body's size justifies (``_check_density``).

orjson is strict and fast but silent about two of these: it keeps the last of duplicate keys,
and it turns an integer beyond 64 bits into a float. Both, and the depth, are detected cheaply
after the parse, mostly in C (``_looks_wrong``); only a body that looks wrong, or that orjson
refused (a lone surrogate, NaN), is parsed again with the standard library, which keeps every key
and every integer exactly, to locate the problems.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ledger.gym.finite_json import NUL_MESSAGE
from ledger.log.errors import InvalidPayload

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# A float this large may be an integer orjson could not hold (it parses those as floats).
_WIDE_FLOAT = float(2**63)
# The most problems one body records: past it the whole body is refused (a batch is at most
# 4096 items, so every item can still fail alone below it).
MAX_PROBLEMS = 4096
# A location names at most this many characters (a path 128 levels deep is long).
MAX_LOCATION_CHARS = 160

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class BodyProblem:
    path: Path
    message: str

    def describe(self, prefix: str = "body") -> str:
        return f"{location(prefix, self.path)}: {self.message}"


def location(prefix: str, path: Path) -> str:
    """``body.items.3.exchange``, shortened in the middle when the path is deep."""
    text = ".".join([prefix, *(_printable(str(part)) for part in path)])
    if len(text) <= MAX_LOCATION_CHARS:
        return text
    half = MAX_LOCATION_CHARS // 2
    return f"{text[:half]}...{text[-half:]}"


def _printable(text: str) -> str:
    """A key as JSON would escape it (control characters and surrogates made visible)."""
    if text.isprintable() and text.isascii():
        return text
    return json.dumps(text)[1:-1]


@dataclass(frozen=True)
class JsonBody:
    """A parsed body and what is wrong with it (empty when nothing)."""

    value: Any
    problems: list[BodyProblem] = field(default_factory=list)

    def refuse_if_wrong(self, prefix: str = "body") -> Any:
        """The value, or ``InvalidPayload`` naming the first problems."""
        if self.problems:
            raise InvalidPayload(describe_problems(self.problems, prefix))
        return self.value

    def split_items(self, key: str) -> tuple[list[BodyProblem], dict[int, BodyProblem]]:
        """Problems outside ``value[key][i]`` (they fail the whole body) and the first problem
        of each item (it fails only that item)."""
        outside: list[BodyProblem] = []
        per_item: dict[int, BodyProblem] = {}
        for problem in self.problems:
            path = problem.path
            if len(path) >= 2 and path[0] == key and isinstance(path[1], int):
                per_item.setdefault(path[1], problem)
            else:
                outside.append(problem)
        return outside, per_item


def describe_problems(problems: list[BodyProblem], prefix: str = "body") -> str:
    shown = [problem.describe(prefix) for problem in problems[:MAX_SHOWN]]
    more = len(problems) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


MAX_SHOWN = 10


def parse_json(raw: bytes, *, max_depth: int, wide_integers: bool = False) -> JsonBody:
    """Parse ``raw``; ``InvalidPayload`` when it is not JSON at all (or nests beyond what any
    parser here will descend, or holds more containers or strings than its size justifies),
    else the value and its problems."""
    _check_density(raw)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        message = str(exc)
        if "depth limit" in message or "recursion" in message:
            raise InvalidPayload(_too_deep(max_depth)) from None
        # A lone surrogate is valid JSON text that no database stores, and NaN/Infinity are
        # what Python's json writes for non-finite floats: the exact parse locates them (and
        # refuses what is not JSON at all).
        return _parse_exactly(raw, max_depth=max_depth, wide_integers=wide_integers)
    if _looks_wrong(raw, value, max_depth):
        return _parse_exactly(raw, max_depth=max_depth, wide_integers=wide_integers)
    return JsonBody(value)


def _looks_wrong(raw: bytes, value: Any, max_depth: int) -> bool:
    """True when ``value`` may hide a dropped duplicate key, nest deeper than ``max_depth`` or
    hold an integer beyond 64 bits (false alarms only cost the exact parse).

    Checked in C where it can be: orjson serialises the value again, which costs about what
    parsing did; its colons are the member separators plus the colons inside strings, so fewer
    than in ``raw`` means a key was dropped. Wrapped in enough lists, the same call fails
    exactly when the value nests deeper than ``max_depth`` (orjson's own limit, measured once
    by ``_dumps_depth_limit``). An integer beyond 64 bits has at least 19 digits in a row. A
    number beyond a float's range (``1e999``), which orjson reads as infinity, comes back from
    the same serialisation as ``null``: more of them than in ``raw`` (where every ``null`` is
    a literal or inside a string) means one was.
    """
    if _has_escaped_colon(raw) or _has_long_digit_run(raw) or _has_nul_escape(raw):
        return True
    limit = _dumps_depth_limit()
    if limit is None or max_depth > limit:
        scan = _scan(value, max_depth)
        return scan.suspicious or scan.colons != raw.count(b":")
    wrapped = value
    for _ in range(limit - max_depth):
        wrapped = [wrapped]
    try:
        dumped = orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        return True
    return dumped.count(b":") != raw.count(b":") or dumped.count(b"null") != raw.count(b"null")


# Every byte to a space except digits, which become "0": a run of digits is then a run of "0".
_DIGITS_ONLY = bytes(
    ord("0") if chr(byte).isdigit() and byte < 128 else ord(" ") for byte in range(256)
)
# 2**63 has 19 digits; shorter integers are always in range.
_LONG_DIGIT_RUN = b"0" * 19


def _has_long_digit_run(raw: bytes) -> bool:
    return raw.translate(_DIGITS_ONLY).find(_LONG_DIGIT_RUN) != -1


@functools.cache
def _dumps_depth_limit() -> int | None:
    """The deepest nesting ``orjson.dumps`` serialises (254 in orjson 3), found by trying;
    None if it does not behave as expected (then the Python scan checks depth)."""

    def nested(depth: int) -> Any:
        value: Any = []
        for _ in range(depth - 1):
            value = [value]
        return value

    for depth in range(2, 4097):
        try:
            orjson.dumps(nested(depth))
        except orjson.JSONEncodeError:
            return depth - 1 if depth > 2 else None
    return None


# A parsed object or array costs about 70 bytes of memory, whatever its text: ``{}`` is 2.
# A body may hold one container per this many bytes (real payloads hold one per 20-40), so
# parsing never costs more than a small multiple of the body.
BYTES_PER_CONTAINER = 12
CONTAINER_ALLOWANCE = 1024
# A parsed string costs about 57 bytes plus its characters (and its slot in a list or dict),
# whatever its text: ``"a",`` is 4. A body may hold one string (keys included) per this many
# bytes: ``"abcde",`` (8 bytes) parses to about 9 times its text, ``"a",`` to 16 times. Numbers
# need no such limit: a small integer is shared, any other number costs at most 9 times its
# shortest text (``1.5,``), so token ids and logprobs in bulk are taken.
BYTES_PER_STRING = 8
STRING_ALLOWANCE = 4096
# A JSON string, escapes included (unrolled: linear, no backtracking).
_JSON_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRING = re.compile(_JSON_STRING)
# Quotes after a run of backslashes this long are counted by walking the strings.
_MAX_BACKSLASH_RUN = 16


def _check_density(raw: bytes) -> None:
    """Refuse, before anything is parsed, a body holding more strings or containers than its
    size justifies (each parses to many times its text: the limits above). Strings are
    counted first, in place: a copy of the body without its strings (``re.sub``, which the
    count of containers makes) holds a list of every piece between them, ten times the body
    for a body of short strings."""
    strings_allowed = STRING_ALLOWANCE + len(raw) // BYTES_PER_STRING
    strings = _count_strings(raw, strings_allowed)
    if strings > strings_allowed:
        raise InvalidPayload(
            f"body: {strings} JSON strings (keys included) in {len(raw)} bytes; at most "
            f"{STRING_ALLOWANCE} plus one per {BYTES_PER_STRING} bytes"
        )
    containers_allowed = CONTAINER_ALLOWANCE + len(raw) // BYTES_PER_CONTAINER
    if raw.count(b"{") + raw.count(b"[") <= containers_allowed:
        return
    # Braces inside strings are text, not containers: count again without the strings. The
    # copy holds a piece per string at most, which the string limit above has bounded.
    structure = _STRING.sub(b"", raw)
    containers = structure.count(b"{") + structure.count(b"[")
    if containers > containers_allowed:
        raise InvalidPayload(
            f"body: {containers} JSON objects and arrays in {len(raw)} bytes; at most "
            f"{CONTAINER_ALLOWANCE} plus one per {BYTES_PER_CONTAINER} bytes"
        )


def _count_strings(raw: bytes, allowed: int) -> int:
    """The strings of a JSON text: two quotes each, besides the escaped quotes inside them
    (those after an odd run of backslashes, counted in C by inclusion and exclusion: the
    quotes after at least 1 backslash, minus those after at least 2, plus...). Only when the
    quick count is over ``allowed``; a run of backslashes too long for that is walked."""
    quotes = raw.count(b'"')
    if quotes // 2 <= allowed:
        return quotes // 2
    escaped, sign = 0, 1
    for run in range(1, _MAX_BACKSLASH_RUN + 1):
        after_run = raw.count(b"\\" * run + b'"')
        if after_run == 0:
            return (quotes - escaped) // 2
        escaped += sign * after_run
        sign = -sign
    strings = 0
    for _ in _STRING.finditer(raw):
        strings += 1
        if strings > allowed:
            break
    return strings


def _too_deep(max_depth: int) -> str:
    return f"body: JSON nests deeper than the limit of {max_depth} levels"


def _bounded(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _has_escaped_colon(raw: bytes) -> bool:
    # ``\u003a`` spells a colon that ``raw.count(b":")`` does not see.
    return b"\\u003" in raw and (b"\\u003a" in raw or b"\\u003A" in raw)


def _has_nul_escape(raw: bytes) -> bool:
    # JSON text spells a NUL only as an escape (a raw control character is not JSON).
    return b"\\u0000" in raw


@dataclass
class _Scan:
    colons: int = 0
    """Member separators plus colons inside strings: equals ``raw.count(b":")`` exactly when no
    key was dropped as a duplicate (and no colon was spelt as an escape)."""
    suspicious: bool = False


def _scan(value: Any, max_depth: int) -> _Scan:
    """One depth-first pass holding one iterator per open level (no recursion, and no list
    of every pending node: depth and width are both attacker-chosen)."""
    scan = _Scan()
    colons = 0
    if type(value) is dict or type(value) is list:
        colons += _own_colons(value)
        stack: list[Iterator[Any]] = [_children(value)]
    else:
        scan.suspicious = _suspicious_scalar(value)
        stack = []
        if type(value) is str:
            colons += value.count(":")
    while stack:
        for child in stack[-1]:
            kind = type(child)
            if kind is str:
                colons += child.count(":")
            elif kind is dict or kind is list:
                if len(stack) + 1 > max_depth:
                    scan.suspicious = True
                    return scan
                colons += _own_colons(child)
                stack.append(_children(child))
                break
            elif (kind is int or kind is float) and _suspicious_scalar(child):
                scan.suspicious = True
        else:
            stack.pop()
    scan.colons = colons
    return scan


def _children(node: dict[str, Any] | list[Any]) -> Iterator[Any]:
    return iter(node.values()) if type(node) is dict else iter(node)


def _own_colons(node: dict[str, Any] | list[Any]) -> int:
    """A dict's member separators and the colons inside its keys."""
    if type(node) is not dict:
        return 0
    return len(node) + sum(key.count(":") for key in node)


def _suspicious_scalar(value: Any) -> bool:
    if type(value) is int:
        return not INT64_MIN <= value <= INT64_MAX
    return type(value) is float and abs(value) >= _WIDE_FLOAT


class _Object(dict[str, Any]):
    """A parsed object that remembers the first key it saw twice (a plain dict otherwise:
    it is what the route validates and stores when nothing is wrong)."""

    __slots__ = ("duplicate",)

    def __init__(self) -> None:
        super().__init__()
        self.duplicate: str | None = None


def _object_of(pairs: list[tuple[str, Any]]) -> _Object:
    result = _Object()
    for key, value in pairs:
        if key in result and result.duplicate is None:
            result.duplicate = key
        result[key] = value
    return result


@dataclass(frozen=True)
class _NonFinite:
    """``NaN``, ``Infinity`` or ``-Infinity`` as Python's json spells them, or a number beyond a
    float's range (``1e999``), which parsers read as infinity: not finite JSON numbers."""

    constant: str
    overflow: bool = False

    def describe(self) -> str:
        if self.overflow:
            return f"{self.constant} is beyond the range of a float (numbers must be finite)"
        return f"{self.constant} is not JSON (numbers must be finite)"


def _non_finite(constant: str) -> _NonFinite:
    return _NonFinite(constant)


def _finite_float(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(_bounded(text, 40), overflow=True)


def _parse_exactly(raw: bytes, *, max_depth: int, wide_integers: bool) -> JsonBody:
    try:
        value = json.loads(
            raw,
            object_pairs_hook=_object_of,
            parse_constant=_non_finite,
            parse_float=_finite_float,
        )
    except RecursionError:
        raise InvalidPayload(_too_deep(max_depth)) from None
    except ValueError as exc:
        raise InvalidPayload(f"body: not valid JSON: {_bounded(str(exc))}") from None
    problems: list[BodyProblem] = []
    for problem in _problems(value, max_depth=max_depth, wide_integers=wide_integers):
        if len(problems) == MAX_PROBLEMS:
            raise InvalidPayload(describe_problems(problems) + "; too many problems")
        problems.append(problem)
    return JsonBody(value, problems)


def _problems(value: Any, *, max_depth: int, wide_integers: bool) -> Iterator[BodyProblem]:
    """Every problem, at most one per batch item (``path[:2]``), in document order; one
    iterator per open level, as in ``_scan``."""
    reported: set[Path] = set()
    path: list[str | int] = []
    stack: list[Iterator[tuple[str | int, Any]]] = []

    def visit(node: Any) -> bool:
        """Report ``node``'s own problem, or open it; True when it was opened."""
        where = tuple(path)
        if where[:2] in reported:
            return False
        problem = _problem_at(node, where, max_depth=max_depth, wide_integers=wide_integers)
        if problem is not None:
            reported.add(where[:2])
            found.append(problem)
            return False
        if isinstance(node, dict):
            stack.append(iter(node.items()))
            return True
        if isinstance(node, list):
            stack.append(enumerate(node))
            return True
        return False

    found: list[BodyProblem] = []
    if not visit(value):
        yield from found
        return
    path.append(0)  # a placeholder for the slot of the level just opened
    while stack:
        yield from found
        found.clear()
        for slot, child in stack[-1]:
            path[-1] = slot
            if visit(child):
                path.append(0)
                break
            yield from found
            found.clear()
        else:
            stack.pop()
            path.pop()
    yield from found


def _problem_at(
    node: Any, path: Path, *, max_depth: int, wide_integers: bool
) -> BodyProblem | None:
    if isinstance(node, dict | list):
        if len(path) + 1 > max_depth:
            return BodyProblem(path, f"JSON nests deeper than the limit of {max_depth} levels")
        if isinstance(node, _Object) and node.duplicate is not None:
            return BodyProblem(path, f"duplicate key {json.dumps(node.duplicate)}")
        if isinstance(node, dict):
            for key in node:
                if not _is_unicode(key):
                    return BodyProblem((*path, key), "key is not valid Unicode (a lone surrogate)")
                if "\x00" in key:
                    return BodyProblem((*path, key), NUL_MESSAGE)
        return None
    if isinstance(node, _NonFinite):
        return BodyProblem(path, node.describe())
    if isinstance(node, str) and not _is_unicode(node):
        return BodyProblem(path, "not valid Unicode (a lone surrogate)")
    if isinstance(node, str) and "\x00" in node:
        return BodyProblem(path, NUL_MESSAGE)
    if (
        not wide_integers
        and isinstance(node, int)
        and not isinstance(node, bool)
        and not INT64_MIN <= node <= INT64_MAX
    ):
        return BodyProblem(path, "integer outside the signed 64-bit range")
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
