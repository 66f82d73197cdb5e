"""``fewer_collections`` (``ledger verify``'s collector settings): cycles made inside are still
collected, and the process's settings come back afterwards."""

from __future__ import annotations

import gc
import weakref

from ledger.log.collection import YOUNG_THRESHOLD, fewer_collections


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_cycles_made_inside_are_collected_and_the_settings_restored() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
        first = _cycle()
        # Reference counting cannot free a cycle: only the collector, running on its own once
        # enough of them are allocated, does (no gc.collect here).
        for _ in range(YOUNG_THRESHOLD * 2):
            _cycle()
        assert first() is None
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
