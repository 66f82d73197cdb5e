"""The one event kind of the evidence area: ``model_call.intent_recorded``.

Gym writes a call's intent (``<id>.tokens.intents``: one bare ``model_call_id`` a line) before
it dispatches the call, so an intent is the earliest evidence that a call was admitted. The
capture-dir follower, ``ledger import --capture-dir`` and the intents route record it; the
commands append it once per (rollout, generation, model_call_id).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ledger.gym.capture_lines import ModelCallId
from ledger.log.events import EventType

MODEL_CALL_INTENT_RECORDED = "model_call.intent_recorded"


class ModelCallIntentRecorded(BaseModel):
    """A model server was about to dispatch this call of the rollout's current generation."""

    model_config = ConfigDict(extra="forbid")

    model_call_id: ModelCallId


EVENT_TYPES: list[EventType] = [EventType(MODEL_CALL_INTENT_RECORDED, ModelCallIntentRecorded)]
