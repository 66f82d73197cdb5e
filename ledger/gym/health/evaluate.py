"""One record's verdict: which checks ran, which lacked their input, what they found.

Per check (registry order), the first rule that applies: an unparseable record makes
``record_unreadable`` find it and every other check unobserved; an unreadable trajectory is
``record_unreadable``'s finding; a check whose input (trajectory, agent turns, observed calls,
bound calls) is not observed is unobserved; otherwise it runs (and a check that raises is
unobserved, with a ``check_execution_error`` finding).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ledger.gym.health import catalogue as c
from ledger.gym.health.bindings import Binding, bind
from ledger.gym.health.facts import Call, RecordFacts
from ledger.gym.health.findings import Finding, rollout_subject
from ledger.gym.health.rules import (
    LENGTH_LIMIT_FINISH_REASONS,
    RULES,
    capture_tokens,
    ended_on_failed_call,
)

Verdict = Literal["healthy", "unhealthy", "unobserved"]

# What each check reads beyond the record itself.
TRAJECTORY = "trajectory"
AGENT_TURNS = "agent_turns"
OBSERVED_CALLS = "observed_calls"
OWNED_CALLS = "owned_calls"
BOUND_CALLS = "bound_calls"
READS: dict[str, frozenset[str]] = {
    c.CHECK_EXECUTION_ERROR: frozenset(),
    c.RECORD_UNREADABLE: frozenset(),
    c.ROLLOUT_DUPLICATE_IDENTITY: frozenset(),
    c.ROLLOUT_MISSING_AGENT_TURNS: frozenset({TRAJECTORY, AGENT_TURNS}),
    c.ROLLOUT_ENDED_ON_FAILED_MODEL_CALL: frozenset({TRAJECTORY, OBSERVED_CALLS}),
    c.AGENT_TURN_HOLLOW: frozenset({TRAJECTORY, AGENT_TURNS}),
    c.MODEL_CALL_ZERO_COMPLETION_TOKENS: frozenset({TRAJECTORY, OWNED_CALLS}),
    c.MODEL_CALL_MISSING_TOKEN_COUNTS: frozenset({TRAJECTORY, OWNED_CALLS}),
    c.TRAJECTORY_CAPTURE_MISMATCH: frozenset({TRAJECTORY, OWNED_CALLS}),
    c.MODEL_CALL_FAILED: frozenset({TRAJECTORY, OWNED_CALLS}),
    c.ROLLOUT_TOKEN_COUNT_MISMATCH: frozenset({TRAJECTORY, BOUND_CALLS}),
    c.MODEL_CALL_RUNAWAY_GENERATION: frozenset({TRAJECTORY, OWNED_CALLS}),
}


@dataclass(frozen=True)
class RolloutDigest:
    """One physical record's outcome, and the figures the quality summary adds up."""

    ordinal: int
    task_index: Any
    rollout_index: Any
    stage_index: Any
    rollout_id: str
    verdict: Verdict
    findings: tuple[Finding, ...]
    unobserved: tuple[str, ...]
    capture_observed: bool = False
    policy_calls_observed: bool = False
    model_calls: int = 0
    successful_model_calls: int = 0
    model_call_errors: int = 0
    errors_by_status: dict[str, int] = field(default_factory=dict)
    ended_on_error: bool = False
    duplicated_calls: int = 0
    transcript_prompt_tokens: int = 0
    transcript_completion_tokens: int = 0
    capture_prompt_tokens: int = 0
    capture_completion_tokens: int = 0

    def with_duplicate(self, count: int) -> RolloutDigest:
        finding = Finding(
            c.ROLLOUT_DUPLICATE_IDENTITY,
            rollout_subject(self.task_index, self.rollout_index),
            {"duplicate_count": count},
        )
        return replace(self, findings=(*self.findings, finding), verdict="unhealthy")

    def line(self) -> dict[str, Any]:
        """The row of ``rollout_verdicts.jsonl``, in Gym's key order."""
        row: dict[str, Any] = {
            "_ng_task_index": self.task_index,
            "_ng_rollout_index": self.rollout_index,
            "rollout_id": self.rollout_id,
            "verdict": self.verdict,
            "findings": [finding.line() for finding in self.findings],
            "unobserved": list(self.unobserved),
        }
        if self.stage_index is not None:
            row["stage_index"] = self.stage_index
        return row


def _unobserved_reason(
    check: str, facts: RecordFacts, calls: list[Call], turn: Binding, owned: Binding
) -> bool:
    """True when the check lacks an input (rules 3-8 of the module docstring)."""
    reads = READS[check]
    if TRAJECTORY in reads and not facts.trajectory_observed:
        return True
    if AGENT_TURNS in reads and not facts.turns_observed:
        return True
    if OBSERVED_CALLS in reads and not (facts.model_calls_observed and calls):
        return True
    binding = owned if OWNED_CALLS in reads else turn
    if reads & {OWNED_CALLS, BOUND_CALLS}:
        if not facts.model_calls_observed:
            return True
        if check == c.TRAJECTORY_CAPTURE_MISMATCH:
            if not (binding.observed or facts.contradiction_gaps):
                return True
        elif not binding.matched:
            return True
    if check == c.ROLLOUT_TOKEN_COUNT_MISMATCH and (
        not facts.turn_call_scope_complete
        or not turn.complete
        or not turn.matched
        or not facts.usage.present
        or any(call.tokens_in is None or call.tokens_out is None for call in turn.matched)
    ):
        return True
    return check == c.MODEL_CALL_RUNAWAY_GENERATION and any(
        call.finish_reason in LENGTH_LIMIT_FINISH_REASONS and call.response is None
        for call in owned.matched
    )


def _unreadable(facts: RecordFacts, ignored: Collection[str]) -> tuple[list[Finding], list[str]]:
    subject = rollout_subject(facts.task_index, facts.rollout_index)
    findings: list[Finding] = []
    unobserved: list[str] = []
    for check in c.ROLLOUT_CHECKS:
        if check in ignored:
            continue
        if check == c.RECORD_UNREADABLE:
            findings.append(
                Finding(
                    check,
                    subject,
                    {"reason": "rollout record is unreadable", "error": facts.parse_error},
                    locator={"source_file": facts.source_file, "line": facts.line_number},
                )
            )
        else:
            unobserved.append(check)
    return findings, unobserved


def _verdict(findings: list[Finding], unobserved: list[str]) -> Verdict:
    if findings:
        return "unhealthy"
    return "unobserved" if unobserved else "healthy"


def evaluate(facts: RecordFacts, ignored: Collection[str] = ()) -> RolloutDigest:
    """The digest of one record, before the run-wide duplicate pass."""
    if facts.parse_error is not None:
        findings, unobserved = _unreadable(facts, ignored)
        return RolloutDigest(
            ordinal=facts.ordinal,
            task_index=facts.task_index,
            rollout_index=facts.rollout_index,
            stage_index=None,
            rollout_id=facts.rollout_id,
            verdict=_verdict(findings, unobserved),
            findings=tuple(findings),
            unobserved=tuple(unobserved),
        )
    subject = rollout_subject(facts.task_index, facts.rollout_index)
    calls = facts.calls()
    turn, owned = bind(facts.trajectory if facts.trajectory_observed else None, calls)
    findings = []
    unobserved = []
    for check in c.ROLLOUT_CHECKS:
        if check in ignored:
            continue
        if facts.trajectory_error is not None and check == c.RECORD_UNREADABLE:
            detail = {
                "reason": "canonical trajectory is unreadable",
                "error": facts.trajectory_error,
            }
            findings.append(Finding(check, subject, detail))
            continue
        if _unobserved_reason(check, facts, calls, turn, owned):
            unobserved.append(check)
            continue
        try:
            findings.extend(RULES[check](facts, calls, turn, owned, subject))
        except Exception as exc:  # a malformed value a check trips over: Gym's rule
            unobserved.append(check)
            if c.CHECK_EXECUTION_ERROR not in ignored:
                detail = {
                    "reason": "check raised an unexpected exception",
                    "failed_check": check,
                    "error": type(exc).__name__,
                }
                findings.append(Finding(c.CHECK_EXECUTION_ERROR, subject, detail))
    failed = [call for call in calls if call.failed]
    identities = Counter(call.identity for call in calls if call.identity is not None)
    capture_prompt, capture_completion = capture_tokens(calls)
    return RolloutDigest(
        ordinal=facts.ordinal,
        task_index=facts.task_index,
        rollout_index=facts.rollout_index,
        stage_index=facts.stage_index,
        rollout_id=facts.rollout_id,
        verdict=_verdict(findings, unobserved),
        findings=tuple(findings),
        unobserved=tuple(unobserved),
        capture_observed=bool(calls),
        policy_calls_observed=facts.turn_call_scope_complete and turn.complete,
        model_calls=len(calls),
        successful_model_calls=sum(call.successful for call in turn.matched),
        model_call_errors=len(failed),
        errors_by_status=dict(
            Counter(
                str(call.status_code) if call.status_code is not None else "unknown"
                for call in failed
            )
        ),
        ended_on_error=ended_on_failed_call(calls),
        duplicated_calls=sum(n - 1 for n in identities.values() if n > 1),
        transcript_prompt_tokens=facts.usage.prompt or 0,
        transcript_completion_tokens=facts.usage.completion or 0,
        capture_prompt_tokens=capture_prompt,
        capture_completion_tokens=capture_completion,
    )
