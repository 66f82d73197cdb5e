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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from ledger.areas.observations.queries import read_record_text_sync

VERDICTS = ("healthy", "unhealthy", "unobserved")


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


def judge_rollouts(
    conn: Connection, judge: Judge, rollout_ids: Sequence[str]
) -> dict[str, Judgement]:
    """Each rollout's judgement (rollouts without an enriched record are left out)."""
    found = {}
    for rollout_id in rollout_ids:
        text = read_record_text_sync(conn, rollout_id)
        if text is not None:
            found[rollout_id] = judge(json.loads(text))
    return found
