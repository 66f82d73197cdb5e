"""The one request-body parser of the JSON routes: parse once with orjson, check what orjson
does not, and say where the body is wrong.

What is refused (each a ``BodyProblem`` at a path, so a batch can fail only the item that holds
it): duplicate object keys, nesting deeper than the configured limit, lone UTF-16 surrogates,
and integers outside the signed 64-bit range (unless the route keeps wide integers, as a
capture's opaque payload does).

orjson is strict and fast but silent about two of these: it keeps the last of duplicate keys,
and it turns an integer beyond 64 bits into a float. Both are detected cheaply after the parse
(one pass over the parsed value, in ``_scan``); only a body that looks wrong, or that orjson
refused for a lone surrogate, is parsed again with the standard library, which keeps every key
and every integer exactly, to locate the problems.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ledger.log.errors import InvalidPayload

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# A float this large may be an integer orjson could not hold (it parses those as floats).
_WIDE_FLOAT = float(2**63)
# The most problems one body records: past it the whole body is refused (a batch is at most
# 4096 items, so every item can still fail alone below it).
MAX_PROBLEMS = 4096
# orjson refuses nesting beyond 1024 itself; the configured limit must stay below.
PARSER_DEPTH_CEILING = 1024
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
    parser here will descend), else the value and its problems."""
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
    scan = _scan(value, max_depth)
    if scan.suspicious or scan.colons != raw.count(b":") or _has_escaped_colon(raw):
        return _parse_exactly(raw, max_depth=max_depth, wide_integers=wide_integers)
    return JsonBody(value)


def _too_deep(max_depth: int) -> str:
    return f"body: JSON nests deeper than the limit of {max_depth} levels"


def _bounded(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _has_escaped_colon(raw: bytes) -> bool:
    # ``\u003a`` spells a colon that ``raw.count(b":")`` does not see.
    return b"\\u003" in raw and (b"\\u003a" in raw or b"\\u003A" in raw)


@dataclass
class _Scan:
    colons: int = 0
    """Member separators plus colons inside strings: equals ``raw.count(b":")`` exactly when no
    key was dropped as a duplicate (and no colon was spelt as an escape)."""
    suspicious: bool = False


def _scan(value: Any, max_depth: int) -> _Scan:
    """One iterative pass (no recursion: depth is attacker-chosen)."""
    scan = _Scan()
    stack: list[tuple[Any, int]] = [(value, 1)]
    colons = 0
    while stack:
        node, depth = stack.pop()
        if type(node) is dict:
            if depth > max_depth:
                scan.suspicious = True
                break
            colons += len(node)
            children: Any = node.values()
            for key in node:
                colons += key.count(":")
        elif type(node) is list:
            if depth > max_depth:
                scan.suspicious = True
                break
            children = node
        else:
            children = (node,)
            depth -= 1
        for child in children:
            kind = type(child)
            if kind is str:
                colons += child.count(":")
            elif kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is int:
                if not INT64_MIN <= child <= INT64_MAX:
                    scan.suspicious = True
            elif kind is float and abs(child) >= _WIDE_FLOAT:
                scan.suspicious = True
    scan.colons = colons
    return scan


class _Object(dict[str, Any]):
    """A parsed object that remembers the first key it saw twice."""

    duplicate: str | None = None


def _object_of(pairs: list[tuple[str, Any]]) -> _Object:
    result = _Object()
    for key, value in pairs:
        if key in result and result.duplicate is None:
            result.duplicate = key
        result[key] = value
    return result


@dataclass(frozen=True)
class _NonFinite:
    """``NaN``, ``Infinity`` or ``-Infinity`` as Python's json spells them: not JSON numbers."""

    constant: str


def _non_finite(constant: str) -> _NonFinite:
    return _NonFinite(constant)


def _parse_exactly(raw: bytes, *, max_depth: int, wide_integers: bool) -> JsonBody:
    try:
        value = json.loads(raw, object_pairs_hook=_object_of, parse_constant=_non_finite)
    except RecursionError:
        raise InvalidPayload(_too_deep(max_depth)) from None
    except ValueError as exc:
        raise InvalidPayload(f"body: not valid JSON: {_bounded(str(exc))}") from None
    problems: list[BodyProblem] = []
    for problem in _problems(value, max_depth=max_depth, wide_integers=wide_integers):
        if len(problems) == MAX_PROBLEMS:
            raise InvalidPayload(describe_problems(problems) + "; too many problems")
        problems.append(problem)
    return JsonBody(_plain(value), problems)


def _problems(value: Any, *, max_depth: int, wide_integers: bool) -> Iterator[BodyProblem]:
    """Every problem, at most one per batch item (``path[:2]``), in document order."""
    reported: set[Path] = set()
    stack: list[tuple[Any, Path]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        unit = path[:2]
        if unit in reported:
            continue
        problem = _problem_at(node, path, max_depth=max_depth, wide_integers=wide_integers)
        if problem is not None:
            reported.add(unit)
            yield problem
            continue
        if isinstance(node, dict):
            stack.extend((node[key], (*path, key)) for key in reversed(list(node)))
        elif isinstance(node, list):
            stack.extend((node[index], (*path, index)) for index in reversed(range(len(node))))


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
        return None
    if isinstance(node, _NonFinite):
        return BodyProblem(path, f"{node.constant} is not JSON (numbers must be finite)")
    if isinstance(node, str) and not _is_unicode(node):
        return BodyProblem(path, "not valid Unicode (a lone surrogate)")
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


def _plain(value: Any) -> Any:
    """The exact parse with plain dicts (iterative, the tree may be deep)."""
    if not isinstance(value, dict | list):
        return value
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, str | int]] = [(value, root, 0)]
    while stack:
        node, parent, slot = stack.pop()
        if isinstance(node, dict):
            copy: Any = dict(node)
            for key, child in copy.items():
                if isinstance(child, dict | list):
                    stack.append((child, copy, key))
        else:
            copy = list(node)
            for index, child in enumerate(copy):
                if isinstance(child, dict | list):
                    stack.append((child, copy, index))
        parent[slot] = copy
    return root[0]
