"""Every in-process test fails when a health check raises, unless it says it expects that.

A check that raises becomes a ``check_execution_error`` finding and its check is unobserved
(Gym's rule, ledger/gym/health/evaluate.py). Tests that filter findings by check name then pass
every "no finding" assertion while the rule they test is crashing: a mutation audit found most
of its surviving mutants that way. ``watch_rules`` wraps each rule of ``RULES`` (the dict the
evaluation reads) to note what it raised; the fixture in tests/conftest.py fails the test with
that list unless it is marked ``health_check_errors`` naming the check that raised.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ledger.gym.health.rules import RULES


@contextmanager
def watch_rules() -> Iterator[list[str]]:
    """The rules' exceptions while the block runs, as ``"<check>: <exception>"`` lines."""
    raised: list[str] = []
    originals = dict(RULES)

    def watched(check: str, rule: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(rule)
        def run(*args: Any) -> Any:
            try:
                return rule(*args)
            except Exception as exc:
                raised.append(f"{check}: {type(exc).__name__}: {exc}")
                raise

        return run

    for check, rule in originals.items():
        RULES[check] = watched(check, rule)
    try:
        yield raised
    finally:
        RULES.update(originals)
