"""Rules of the API that its OpenAPI document cannot state, applied to the fuzz's valid cases.

JSON Schema has no keyword for these, so schemathesis' generated "valid" requests can break
them; the fuzz shapes its positive cases by them (and only by them) before sending, so that
``positive_data_acceptance`` holds every other refusal of a valid request to be a defect.
Each rule is in docs/api.md; docs/decisions.md ("hardening-rest") says why each is here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from schemathesis.generation.case import Case

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Routes whose body keeps integers of any size (an exchange is opaque model-server JSON).
WIDE_INTEGER_OPERATIONS = frozenset(
    {"POST /v1/rollouts/{rollout_id}/model-calls", "POST /v1/model-calls/batch"}
)
ROW_LOOKUP = "GET /v1/rollouts/{rollout_id}/ledger/rows"
OBSERVATIONS = "POST /v1/rollouts/{rollout_id}/observations"


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_whole(item) for item in value]
    if isinstance(value, dict):
        return {key: _whole(item) for key, item in value.items()}
    return value


def integers_spelled_whole(case: Case[Any]) -> Case[Any]:
    """``2.0`` as ``2``: JSON Schema 2020-12 counts ``2.0`` an integer, but an integer field
    takes only an integer spelled without a fraction (strict, as Gym's models)."""
    if isinstance(case.body, dict | list):
        case.body = _whole(case.body)
    return case


def _integers_within_64_bits(value: Any) -> bool:
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, bool):
            continue
        if isinstance(current, int) and not INT64_MIN <= current <= INT64_MAX:
            return False
        if isinstance(current, list):
            stack.extend(current)
        elif isinstance(current, dict):
            stack.extend(current.values())
    return True


def _without_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str) and "\x00" in current:
            return False
        if isinstance(current, list):
            stack.extend(current)
        elif isinstance(current, dict):
            stack.extend(current.keys())
            stack.extend(current.values())
    return True


def _moment(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _observations_consistent(body: Any) -> bool:
    """Across the records of a bundle: invocation ids are unique, parent links make no
    cycle; within a tool call, ``completed_at`` is not before ``started_at``."""
    records = body.get("records", []) if isinstance(body, dict) else []
    parents: dict[str, Any] = {}
    for record in records:
        if not isinstance(record, dict):
            continue
        started, completed = record.get("started_at"), record.get("completed_at")
        if started is not None and completed is not None and completed < started:
            return False
        if record.get("kind") == "agent_invocation":
            invocation: Any = record.get("invocation_id")
            if invocation in parents:
                return False
            parents[invocation] = record.get("parent_invocation_id")
    for start in parents:
        seen, node = set(), start
        while node in parents:
            if node in seen:
                return False
            seen.add(node)
            node = parents[node]
    return True


def follows_unwritten_rules(case: Case[Any]) -> bool:
    label = case.operation.label
    query = case.query or {}
    # A window's start is before its end (since/until of the health and perf selections).
    since, until = _moment(query.get("since")), _moment(query.get("until"))
    if since is not None and until is not None and since >= until:
        return False
    # A row lookup names what it looks up: a fingerprint, a model_call_id or both.
    if (
        label == ROW_LOOKUP
        and query.get("fingerprint") is None
        and query.get("model_call_id") is None
    ):
        return False
    if label == OBSERVATIONS and not _observations_consistent(case.body):
        return False
    # No string or key of a JSON body holds a NUL character (PostgreSQL text cannot).
    if not _without_nul(case.body):
        return False
    # Any integer in a JSON body, free-form content included, fits in 64 bits (but captures).
    return label in WIDE_INTEGER_OPERATIONS or _integers_within_64_bits(case.body)
