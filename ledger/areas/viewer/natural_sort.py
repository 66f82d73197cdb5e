"""A rollout id's natural sort key in SQL: Gym's ids are ``<task>-<rollout>[-a<attempt>]``
(contract §4), and sorted as text ``0-10`` comes before ``0-2``. The key left-pads the first
three ``-``-separated segments to ``WIDTH`` characters (``0000000000.0000000002.`` ...), so
text order on the key is number order on each segment, and an attempt sorts right after the
rollout it retries. One string, so the overview's keyset cursor (key, id) stays as it is.

Both backends: SQLite has no ``lpad`` and PostgreSQL no ``instr``, so the two functions
compile per dialect. A segment longer than ``WIDTH`` is cut (its ties fall back to the id).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, String, case, func, literal
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import GenericFunction

WIDTH = 10


class _position(GenericFunction[int]):
    """1-based position of the second argument in the first, 0 when absent."""

    inherit_cache = True
    name = "viewer_position"


class _pad(GenericFunction[str]):
    """The argument left-padded with zeros to ``WIDTH`` characters."""

    type = String()
    inherit_cache = True
    name = "viewer_pad"


@compiles(_position)
def _position_default(element: Any, compiler: Any, **kw: Any) -> str:
    return f"instr({compiler.process(element.clauses, **kw)})"


@compiles(_position, "postgresql")
def _position_postgres(element: Any, compiler: Any, **kw: Any) -> str:
    return f"strpos({compiler.process(element.clauses, **kw)})"


@compiles(_pad)
def _pad_default(element: Any, compiler: Any, **kw: Any) -> str:
    arg = compiler.process(element.clauses, **kw)
    return f"substr('{'0' * WIDTH}' || {arg}, -{WIDTH}, {WIDTH})"


@compiles(_pad, "postgresql")
def _pad_postgres(element: Any, compiler: Any, **kw: Any) -> str:
    return f"lpad({compiler.process(element.clauses, **kw)}, {WIDTH}, '0')"


def _split(text: ColumnElement[str]) -> tuple[ColumnElement[str], ColumnElement[str]]:
    """(before the first ``-``, after it); ("text", "") without one."""
    at = _position(text, literal("-"))
    head = case((at == 0, text), else_=func.substr(text, 1, at - 1))
    tail = case((at == 0, literal("")), else_=func.substr(text, at + 1))
    return head, tail


def natural_key(rollout_id: ColumnElement[str]) -> ColumnElement[str]:
    first, rest = _split(rollout_id)
    second, third = _split(rest)
    return _pad(first) + "." + _pad(second) + "." + _pad(third)
