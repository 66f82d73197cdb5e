"""The rollout checks' triggers and findings (what each emits once its inputs are observed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ledger.gym.health import catalogue as c
from ledger.gym.health.bindings import Binding, key_locator, reference_key
from ledger.gym.health.content import has_tool_call, nonempty, response_has_content
from ledger.gym.health.facts import CONTRADICTION_GAPS, Call, RecordFacts, is_count
from ledger.gym.health.findings import Finding

LENGTH_LIMIT_FINISH_REASONS = frozenset({"length", "max_output_tokens", "max_tokens"})


def _turn_has_message(turn: dict[str, Any]) -> bool:
    return nonempty(turn.get("answer")) or nonempty(turn.get("reasoning_content"))


def _turn_has_activity(turn: dict[str, Any]) -> bool:
    refs = turn.get("model_calls") or []
    return (
        _turn_has_message(turn)
        or has_tool_call(turn.get("answer"))
        or any(reference_key(ref) is not None for ref in refs)
    )


def missing_agent_turns(facts: RecordFacts, subject: dict[str, Any]) -> list[Finding]:
    if any(_turn_has_activity(turn) for turn in facts.turns):
        return []
    return [
        Finding(
            c.ROLLOUT_MISSING_AGENT_TURNS, subject, {"reason": "no agent turn with model activity"}
        )
    ]


def agent_turn_hollow(facts: RecordFacts, subject: dict[str, Any]) -> list[Finding]:
    return [
        Finding(
            c.AGENT_TURN_HOLLOW,
            subject,
            {"reason": "agent turn has no message or tool calls"},
            locator={"turn": turn.get("turn_no", position)},
        )
        for position, turn in enumerate(facts.turns)
        if not _turn_has_message(turn) and not has_tool_call(turn.get("answer"))
    ]


def chains(calls: list[Call]) -> dict[Any, list[Call]]:
    """Calls grouped by the model they went to (None: no model_ref), in first-seen order."""
    grouped: dict[Any, list[Call]] = {}
    for call in calls:
        ref = call.model_ref
        key = (ref.get("type"), ref.get("name")) if isinstance(ref, dict) else None
        grouped.setdefault(key, []).append(call)
    return grouped


def _in_time_order(chain: list[Call]) -> list[Call]:
    return sorted(chain, key=lambda call: (call.started_at or 0.0, call.call_index or 0))


def chain_ended_on_failure(chain: list[Call]) -> bool:
    """The model's last call failed. Without a start time on every call a chain that mixes
    failures and successes cannot be ordered, and says nothing."""
    failed = sum(call.failed for call in chain)
    if failed == 0:
        return False
    if failed == len(chain):
        return True
    if any(call.started_at is None for call in chain):
        return False
    return _in_time_order(chain)[-1].failed


def ended_on_failed_call(calls: list[Call]) -> bool:
    return any(chain_ended_on_failure(chain) for chain in chains(calls).values())


def ended_on_failed_model_call(calls: list[Call], subject: dict[str, Any]) -> list[Finding]:
    findings = []
    for key, chain in chains(calls).items():
        if not chain_ended_on_failure(chain):
            continue
        last = _in_time_order(chain)[-1]
        detail = {
            "model_ref": "/".join(str(part) for part in key) if key else None,
            "status": last.status_code,
            "error_category": last.error_category,
            "observed_calls": len(chain),
            "successful_calls": sum(call.successful for call in chain),
        }
        findings.append(
            Finding(
                c.ROLLOUT_ENDED_ON_FAILED_MODEL_CALL,
                subject,
                detail,
                locator=last.locator(last.call_index),
            )
        )
    return findings


def zero_completion_tokens(owned: Binding, subject: dict[str, Any]) -> list[Finding]:
    return [
        Finding(
            c.MODEL_CALL_ZERO_COMPLETION_TOKENS,
            subject,
            {"completion_tokens": 0},
            locator=call.locator(position),
        )
        for position, call in enumerate(owned.matched)
        if call.tokens_out == 0
    ]


def missing_token_counts(owned: Binding, subject: dict[str, Any]) -> list[Finding]:
    findings = []
    for position, call in enumerate(owned.matched):
        missing = [
            name
            for name, value in (
                ("prompt_tokens", call.tokens_in),
                ("completion_tokens", call.tokens_out),
            )
            if value is None
        ]
        if missing:
            findings.append(
                Finding(
                    c.MODEL_CALL_MISSING_TOKEN_COUNTS,
                    subject,
                    {"missing": missing},
                    locator=call.locator(position),
                )
            )
    return findings


def capture_mismatch(facts: RecordFacts, owned: Binding, subject: dict[str, Any]) -> list[Finding]:
    findings = []
    seen: set[tuple[str, str]] = set()
    from_references: list[tuple[str, str, dict[str, Any]]] = [
        ("missing_captured_call", key, {"kind": "missing_captured_call"}) for key in owned.missing
    ]
    from_references += [
        ("duplicated_captured_call", key, {"kind": "duplicated_captured_call", "count": count})
        for key, count in owned.duplicated
    ]
    for kind, key, detail in from_references:
        locator = key_locator(key)
        if (kind, locator["call_id"]) in seen:
            continue
        seen.add((kind, locator["call_id"]))
        findings.append(Finding(c.TRAJECTORY_CAPTURE_MISMATCH, subject, detail, locator=locator))
    # Gap findings are not remembered: two identical gaps give two findings.
    for gap in facts.contradiction_gaps:
        kind = CONTRADICTION_GAPS[gap["code"]]
        call_id = str(gap.get("detail") or "unknown").split(":")[-1]
        if (kind, call_id) in seen:
            continue
        detail = {
            "kind": kind,
            "observation_gap": gap["code"],
            "invocation_id": gap.get("invocation_id"),
        }
        findings.append(
            Finding(c.TRAJECTORY_CAPTURE_MISMATCH, subject, detail, locator={"call_id": call_id})
        )
    return findings


def failed_calls(owned: Binding, subject: dict[str, Any]) -> list[Finding]:
    last_index = max((call.call_index for call in owned.matched), default=None)
    return [
        Finding(
            c.MODEL_CALL_FAILED,
            subject,
            {
                "status": call.status_code,
                "error_category": call.error_category,
                "terminal": owned.complete and call.call_index == last_index,
            },
            locator=call.locator(position),
        )
        for position, call in enumerate(owned.matched)
        if call.failed
    ]


def capture_tokens(calls: tuple[Call, ...] | list[Call]) -> tuple[int, int]:
    prompt = sum(call.tokens_in for call in calls if is_count(call.tokens_in))
    completion = sum(call.tokens_out for call in calls if is_count(call.tokens_out))
    return prompt, completion


def token_count_mismatch(
    facts: RecordFacts, turn: Binding, subject: dict[str, Any]
) -> list[Finding]:
    usage = facts.usage
    capture_prompt, capture_completion = capture_tokens(turn.matched)
    if not usage.present or (usage.prompt, usage.completion) == (
        capture_prompt,
        capture_completion,
    ):
        return []
    detail = {
        "transcript_prompt": usage.prompt,
        "transcript_completion": usage.completion,
        "capture_prompt": capture_prompt,
        "capture_completion": capture_completion,
    }
    return [Finding(c.ROLLOUT_TOKEN_COUNT_MISMATCH, subject, detail)]


def runaway_generation(owned: Binding, subject: dict[str, Any]) -> list[Finding]:
    return [
        Finding(
            c.MODEL_CALL_RUNAWAY_GENERATION,
            subject,
            {"finish_reason": call.finish_reason},
            locator=call.locator(position),
        )
        for position, call in enumerate(owned.matched)
        if call.finish_reason in LENGTH_LIMIT_FINISH_REASONS
        and not response_has_content(call.response)
    ]


Rule = Callable[[RecordFacts, list[Call], Binding, Binding, dict[str, Any]], list[Finding]]

# (facts, calls, turn bindings, owned bindings, subject) -> findings. The first three checks
# find nothing once they run: their findings come from the reading and the duplicate pass.
RULES: dict[str, Rule] = {
    c.CHECK_EXECUTION_ERROR: lambda f, calls, turn, owned, s: [],
    c.RECORD_UNREADABLE: lambda f, calls, turn, owned, s: [],
    c.ROLLOUT_DUPLICATE_IDENTITY: lambda f, calls, turn, owned, s: [],
    c.ROLLOUT_MISSING_AGENT_TURNS: lambda f, calls, turn, owned, s: missing_agent_turns(f, s),
    c.ROLLOUT_ENDED_ON_FAILED_MODEL_CALL: lambda f, calls, turn, owned, s: (
        ended_on_failed_model_call(calls, s)
    ),
    c.AGENT_TURN_HOLLOW: lambda f, calls, turn, owned, s: agent_turn_hollow(f, s),
    c.MODEL_CALL_ZERO_COMPLETION_TOKENS: lambda f, calls, turn, owned, s: zero_completion_tokens(
        owned, s
    ),
    c.MODEL_CALL_MISSING_TOKEN_COUNTS: lambda f, calls, turn, owned, s: missing_token_counts(
        owned, s
    ),
    c.TRAJECTORY_CAPTURE_MISMATCH: lambda f, calls, turn, owned, s: capture_mismatch(f, owned, s),
    c.MODEL_CALL_FAILED: lambda f, calls, turn, owned, s: failed_calls(owned, s),
    c.ROLLOUT_TOKEN_COUNT_MISMATCH: lambda f, calls, turn, owned, s: token_count_mismatch(
        f, turn, s
    ),
    c.MODEL_CALL_RUNAWAY_GENERATION: lambda f, calls, turn, owned, s: runaway_generation(owned, s),
}
