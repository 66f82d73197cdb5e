"""The overview's selection summary, kept per filter until the log moves.

The summary aggregates every selected rollout (100,000 rows at scale); the page itself reads
one page. Keyed by the head seq, an entry is exact: any new event changes the key.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ledger.areas.viewer.overview_query import OverviewFilter, OverviewSummary

ENTRIES = 64


class SummaryCache:
    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[OverviewFilter, int], OverviewSummary] = OrderedDict()

    @classmethod
    def of(cls, state: Any) -> SummaryCache:
        """The app's cache (made on first use: nothing is built when the area is listed)."""
        cache = getattr(state, "viewer_summary_cache", None)
        if not isinstance(cache, SummaryCache):
            cache = cls()
            state.viewer_summary_cache = cache
        return cache

    def get(self, flt: OverviewFilter, head: int) -> OverviewSummary | None:
        found = self._entries.get((flt, head))
        if found is not None:
            self._entries.move_to_end((flt, head))
        return found

    def put(self, flt: OverviewFilter, head: int, summary: OverviewSummary) -> None:
        self._entries[(flt, head)] = summary
        while len(self._entries) > ENTRIES:
            self._entries.popitem(last=False)
