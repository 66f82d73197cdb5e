"""``json.loads`` for files the ledger reads into its log: only finite JSON numbers.

Python's ``json`` reads ``NaN``, ``Infinity`` and ``-Infinity``, and a number beyond a float's
range (``1e999``) as infinity. None of them is a JSON number, and the log's payload encoding
expects finite values (log/canonical.py, scheme 2), so a reader whose lines become events
refuses them with a ValueError naming the number. Such a reader also asks ``holds_nul``: the
HTTP boundary refuses a NUL character (PostgreSQL's text cannot hold one, and a view writes
some strings of an event into text columns), and a file's lines are held to the same.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any


def _refuse_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is beyond the range of a float")
    return value


def loads_finite(text: str | bytes) -> Any:
    """``json.loads(text)``; ValueError (``JSONDecodeError`` for what is not JSON at all) for a
    number that is not finite."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)


NUL_MESSAGE = "holds a NUL character (\\u0000), which the ledger does not store"


def holds_nul(value: Any) -> bool:
    """Whether a parsed JSON value holds a NUL in any string, keys included (a walk that keeps
    one iterator per open level: no recursion)."""
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        for item in stack[-1]:
            if isinstance(item, str):
                if "\x00" in item:
                    return True
            elif isinstance(item, dict):
                stack.append(iter([*item.keys(), *item.values()]))
                break
            elif isinstance(item, list):
                stack.append(iter(item))
                break
        else:
            stack.pop()
    return False
