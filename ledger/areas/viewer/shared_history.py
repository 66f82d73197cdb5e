"""Reading a page of captured calls without parsing, for each call, the history it repeats.

An agent's request carries the whole conversation so far, so call n of a thread holds n
turns of history, and a page of 100 calls late in a long rollout holds 100 copies of it: the
transcript's last page of a 400-call thread parsed 70,000 messages to show 200 new ones.
Stored payloads are canonical JSON (sorted keys, no whitespace: ``ledger.log.canonical``), so
a request that continues an earlier one starts its item list with the earlier one's items,
byte for byte. ``HistoryParser`` keeps the last few requests it parsed (their text and
items); for the next payload it finds the item list (``exchange.request.messages`` or
``.input``) by walking the few keys before it, and when the text there starts with a kept
request's whole item list, it reuses those items and parses only the rest. The comparison is
of text (a memory compare), so history is read, not parsed; anything it does not recognise
(another shape, an edited history) is parsed whole. Either way the value is the one
``parse_json`` gives: the reused items are equal to what parsing them would give.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any

from ledger.log.canonical import parse_json

ITEM_KEYS = frozenset({"messages", "input"})
REMEMBERED = 8
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class _Kept:
    text: str
    start: int  # offset of the first item (just after "[")
    end: int  # offset of the list's "]"
    items: list[Any]


@dataclass(frozen=True)
class _Located:
    key: str
    start: int


class _NotCanonical(ValueError):
    """The text is not laid out as this parser expects: parse it whole."""


def _key_at(text: str, at: int) -> tuple[str, int]:
    """The object key starting at ``at`` and the offset after its ``:``."""
    if text[at] != '"':
        raise _NotCanonical
    key, end = _DECODER.raw_decode(text, at)
    if not isinstance(key, str) or text[end] != ":":
        raise _NotCanonical
    return key, end + 1


def _locate(text: str) -> _Located | None:
    """Where ``exchange.request``'s item list starts, walking (and skipping by parsing) only
    the keys before it; None when the payload has no such list."""
    prefix = '{"exchange":{'
    if not text.startswith(prefix):
        return None
    at = len(prefix)
    for path_key, wanted in (("exchange", "request"), ("request", None)):
        while True:
            key, at = _key_at(text, at)
            if wanted is not None and key == wanted:
                if text[at] != "{":
                    return None
                at += 1
                break
            if wanted is None and key in ITEM_KEYS:
                return _Located(key, at + 1) if text[at] == "[" else None
            if (wanted is not None and key > wanted) or (wanted is None and key > "messages"):
                return None  # keys are sorted: it is not there
            _value, at = _DECODER.raw_decode(text, at)
            if text[at] == ",":
                at += 1
            elif text[at] == "}":
                return None
            else:
                raise _NotCanonical(path_key)
    return None


class HistoryParser:
    """Parses capture payloads in call order, reusing the item lists they share."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._kept: deque[_Kept] = deque(maxlen=remembered)
        self.reused_items = 0  # items taken from an earlier request instead of parsed

    def parse(self, text: str) -> Any:
        try:
            located = _locate(text)
        except (_NotCanonical, ValueError, IndexError):
            located = None
        if located is None:
            return parse_json(text)
        try:
            items, end = self._items(text, located.start)
            rest = parse_json(text[: located.start] + text[end:])
        except (_NotCanonical, ValueError, IndexError):
            return parse_json(text)
        request = rest.get("exchange", {}).get("request")
        if not isinstance(request, dict) or request.get(located.key) != []:
            return parse_json(text)
        request[located.key] = items
        self._kept.append(_Kept(text, located.start, end, items))
        return rest

    def _items(self, text: str, start: int) -> tuple[list[Any], int]:
        """The items of the list starting at ``start``, and the offset of its ``]``."""
        items: list[Any] = []
        at = start
        for kept in sorted(self._kept, key=lambda k: k.end - k.start, reverse=True):
            length = kept.end - kept.start
            if (
                length
                and text.startswith(kept.text[kept.start : kept.end], start)
                and text[start + length] in ",]"
            ):
                items = list(kept.items)
                self.reused_items += len(items)
                at = start + length
                break
        while text[at] != "]":
            if items:
                if text[at] != ",":
                    raise _NotCanonical
                at += 1
            item, at = _DECODER.raw_decode(text, at)
            items.append(item)
        return items, at
