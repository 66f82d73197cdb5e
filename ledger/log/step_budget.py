"""How much a follower's write step takes on: what fits a time budget.

A step of the views' follower (a page of events applied, or rows of a retired build's table
deleted) is a write transaction, and it holds the lock the appends take (SQLite's one write
lock, PostgreSQL's append lock): an append that arrives meanwhile waits for the rest of the
step. What an item costs is not fixed: the same page took several times longer while 16
clients appended and a large WAL was being copied back than on a quiet machine
(docs/decisions.md, follow-the-log 34). So the next step's size follows the last one's time:
as many items as the last one's rate fits in ``budget_s``, between ``least`` and ``most``.
"""

from __future__ import annotations

# What a step may hold the appends' lock for, its commit aside.
BUDGET_S = 0.1


class StepBudget:
    def __init__(self, most: int, *, least: int = 1, budget_s: float = BUDGET_S) -> None:
        """``most``: the size of a step on a quiet machine (and the first step's); ``least``:
        the smallest, so that a step's own statements stay a small share of it."""
        self._most = most
        self._least = min(least, most)
        self._budget_s = budget_s
        self.size = most

    def observe(self, items: int, seconds: float) -> None:
        """A step of ``items`` took ``seconds`` under the lock."""
        if items <= 0 or seconds <= 0:
            return
        fits = int(items * self._budget_s / seconds)
        # At most twice the last size: one quick step says little about the next one.
        self.size = max(self._least, min(self._most, fits, self.size * 2))
