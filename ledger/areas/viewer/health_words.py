"""How the pages name health outcomes: a verdict in words, what each rollout check looks for,
and the one explanation of "unobserved" (a check that lacked its input says nothing about the
rollout, so it is never shown as if it were a verdict)."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.areas.viewer.markup import Html, html, query

# Gym's rollout checks (ledger/gym/health/catalogue.py), in its registry order, with what each
# one finds. The viewer shows these; the rules themselves are the health area's.
CHECKS: dict[str, str] = {
    "check_execution_error": "a check raised on a malformed value",
    "record_unreadable": "the record or its trajectory could not be read",
    "rollout_duplicate_identity": "another record has the same task and rollout (run-level)",
    "rollout_missing_agent_turns": "no agent turn with model activity",
    "rollout_ended_on_failed_model_call": "a model's last call failed",
    "agent_turn_hollow": "an agent turn with no message and no tool call",
    "model_call_zero_completion_tokens": "a call generated no token",
    "model_call_missing_token_counts": "a call without prompt or completion token counts",
    "trajectory_capture_mismatch": "the trajectory and the captured calls disagree",
    "model_call_failed": "a model call failed (status ≥ 400 or an error)",
    "rollout_token_count_mismatch": "the agent's reported usage differs from the captured calls",
    "model_call_runaway_generation": "a call hit its length limit with no content",
}
ROLLOUT_CHECKS: tuple[str, ...] = tuple(CHECKS)

UNOBSERVED_NOTE = (
    "A check is unobserved when the rollout's evidence lacks what it reads (no producer turns,"
    " no captured calls bound to a turn, no usage in the agent's response for the token-count"
    " check). It says nothing about the rollout: a rollout with no finding and some checks"
    " unobserved is shown as “no findings”, with the checks that could not run."
)


def verdict_words(verdict: str | None, unobserved: int) -> str:
    """``unobserved`` as what it means, never as a verdict."""
    if verdict == "unobserved":
        return f"no findings · {unobserved} unobserved"
    return verdict or "–"


def check_link(check: str, **filters: object) -> Html:
    """The check's name, linked to the overview filtered on it."""
    return html(
        '<a class="check" href="{href}" title="{what}">{check}</a>',
        href="/ui/" + query(check=check, **filters),
        what=CHECKS.get(check, ""),
        check=check,
    )


def failing_checks(findings: Sequence[dict[str, object]]) -> list[str]:
    """The checks with a finding, once each, in registry order."""
    found = {str(f.get("check")) for f in findings}
    return [c for c in ROLLOUT_CHECKS if c in found] + sorted(found - set(ROLLOUT_CHECKS))


def unobserved_note() -> Html:
    return html('<p class="muted note" id="unobserved-note">{t}</p>', t=UNOBSERVED_NOTE)
