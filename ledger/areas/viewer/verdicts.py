"""Verdicts and findings from the health area's pure rules (``ledger/gym/health``), when the
ledger has them.

The rules live on another branch until it is merged; the viewer looks them up by module name
when a page needs them, so it works (with the verdict column showing "–") without them and
shows verdicts as soon as they are there, with no change here. A verdict is Gym's per-record
check (``evaluate(record_facts(record))``) over the enriched record a reader gets; the
run-level parts (duplicate identity, task checks) need the whole run and are the health
area's ``/v1/health``.
"""

from __future__ import annotations

import functools
import importlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from ledger.areas.observations.queries import read_record_text_sync

VERDICTS = ("healthy", "unhealthy", "unobserved")
CACHE_ENTRIES = 20_000
CACHE_ENTRIES = 20_000


@dataclass(frozen=True)
class Judgement:
    verdict: str
    findings: tuple[dict[str, Any], ...]
    unobserved: tuple[str, ...]


Judge = Callable[[dict[str, Any]], Judgement]


@functools.cache
def health_rules() -> Judge | None:
    """The per-record judge, or None when the health rules are not installed."""
    try:
        evaluate = importlib.import_module("ledger.gym.health.evaluate").evaluate
        record_facts = importlib.import_module("ledger.gym.health.facts").record_facts
    except ModuleNotFoundError:
        return None

    def judge(record: dict[str, Any]) -> Judgement:
        digest = evaluate(record_facts(record, 0))
        return Judgement(
            verdict=str(digest.verdict),
            findings=tuple(finding.public() for finding in digest.findings),
            unobserved=tuple(str(check) for check in digest.unobserved),
        )

    return judge


class JudgementCache:
    """Judgements by (rollout id, last seq): a rollout's record changes only with its own
    events, each of which moves its ``last_seq``, so an entry is exact while the key matches.
    Judging a long rollout's record costs much more than reading a page (the rules validate
    the whole trajectory), so a page shown again does not pay it again. Used from the
    SQLite reader thread and the event loop: a lock keeps the LRU consistent."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self._entries: OrderedDict[tuple[str, int], Judgement] = OrderedDict()
        self._limit = entries
        self._lock = threading.Lock()

    @classmethod
    def of(cls, state: Any) -> JudgementCache:
        """The app's cache (made on first use: nothing is built when the area is listed)."""
        cache = getattr(state, "viewer_judgement_cache", None)
        if not isinstance(cache, JudgementCache):
            cache = cls()
            state.viewer_judgement_cache = cache
        return cache

    def get(self, key: tuple[str, int]) -> Judgement | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: tuple[str, int], judgement: Judgement) -> None:
        with self._lock:
            self._entries[key] = judgement
            self._entries.move_to_end(key)
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)


def judge_rollouts(
    conn: Connection,
    judge: Judge,
    rollouts: Sequence[tuple[str, int]],
    cache: JudgementCache | None = None,
) -> dict[str, Judgement]:
    """Each (rollout id, last seq)'s judgement (rollouts without an enriched record are left
    out)."""
    found = {}
    for rollout_id, last_seq in rollouts:
        cached = cache.get((rollout_id, last_seq)) if cache is not None else None
        if cached is not None:
            found[rollout_id] = cached
            continue
        text = read_record_text_sync(conn, rollout_id)
        if text is not None:
            found[rollout_id] = judgement = judge(json.loads(text))
            if cache is not None:
                cache.put((rollout_id, last_seq), judgement)
    return found
