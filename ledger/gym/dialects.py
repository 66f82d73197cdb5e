"""The observed dialects (contract §2.2): which exact path after the rollout prefix is which."""

from __future__ import annotations

from typing import Literal

Dialect = Literal["responses", "chat", "messages"]

DIALECT_BY_PATH: dict[str, Dialect] = {
    "/v1/responses": "responses",
    "/v1/chat/completions": "chat",
    "/v1/messages": "messages",
}

# Gym's rollout prefix: ``/ng-rollout/<rollout_id>`` before the dialect path.
ROLLOUT_PATH_PREFIX = "ng-rollout"

# The response header carrying the captured call's id (contract §2.2, version C).
MODEL_CALL_ID_HEADER = "x-nemo-gym-model-call-id"

# The request header whose single distinct value is stored as ``client_session_id``.
SESSION_ID_HEADER = "x-session-id"


def dialect_of_path(path: str) -> Dialect | None:
    return DIALECT_BY_PATH.get(path)
