"""The overview's selection summary, kept per filter for a few seconds.

The summary aggregates every selected rollout and every call of them (100,000 rollouts at
scale, hundreds of milliseconds); the page itself reads one page by index. An entry is exact
while the log's head seq is unchanged, and is reused for up to ``MAX_AGE_SECONDS`` after the
log moved on: a run being written does not recompute it on every load. The page says which
event the summary is as of.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ledger.areas.viewer.overview_query import OverviewFilter, OverviewSummary

ENTRIES = 64
MAX_AGE_SECONDS = 10.0


@dataclass(frozen=True)
class CachedSummary:
    summary: OverviewSummary
    head_seq: int
    computed_at: float


class SummaryCache:
    def __init__(self, max_age_seconds: float = MAX_AGE_SECONDS) -> None:
        self._entries: OrderedDict[OverviewFilter, CachedSummary] = OrderedDict()
        self.max_age_seconds = max_age_seconds

    @classmethod
    def of(cls, state: Any) -> SummaryCache:
        """The app's cache (made on first use: nothing is built when the area is listed)."""
        cache = getattr(state, "viewer_summary_cache", None)
        if not isinstance(cache, SummaryCache):
            cache = cls()
            state.viewer_summary_cache = cache
        return cache

    def get(self, flt: OverviewFilter, head: int) -> CachedSummary | None:
        found = self._entries.get(flt)
        if found is None:
            return None
        fresh = found.head_seq == head or (
            time.monotonic() - found.computed_at < self.max_age_seconds
        )
        if not fresh:
            return None
        self._entries.move_to_end(flt)
        return found

    def put(self, flt: OverviewFilter, head: int, summary: OverviewSummary) -> CachedSummary:
        entry = CachedSummary(summary, head, time.monotonic())
        self._entries[flt] = entry
        self._entries.move_to_end(flt)
        while len(self._entries) > ENTRIES:
            self._entries.popitem(last=False)
        return entry
