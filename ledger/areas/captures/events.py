"""Event kinds of the capture area (Gym's CaptureStore, contract §2.3, as facts).

Every capture event belongs to one rollout id and its current generation. ``call_index`` is not
stored in any event: it is the durable append position, i.e. the number of ``model_call.captured``
and ``model_call.damaged`` events of the rollout's current generation since its last
``capture.cleared`` (the projection counts them), exactly like a line position in Gym's file.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ledger.areas.captures.derivation import DerivedCall, derive_call
from ledger.log.events import EventType

MODEL_CALL_CAPTURED = "model_call.captured"
MODEL_CALL_DAMAGED = "model_call.damaged"
CAPTURE_MARKED_INCOMPLETE = "capture.marked_incomplete"
CAPTURE_CLEARED = "capture.cleared"
CAPTURE_PENDING_ANNOUNCED = "capture.pending_announced"
CAPTURE_PENDING_WITHDRAWN = "capture.pending_withdrawn"


class ModelCallCaptured(BaseModel):
    """One raw exchange, exactly the JSON object of Gym's capture line.

    ``exchange`` is kept verbatim (values as received), so the mirror writes the same line back.
    ``model_call_id`` repeats the exchange's id (null only for imported lines without one).
    """

    model_config = ConfigDict(extra="forbid")

    model_call_id: str | None
    exchange: dict[str, Any]


class ModelCallDamaged(BaseModel):
    """An imported capture line that is not a JSON object: kept as evidence, text unchanged.

    It consumes a ``call_index`` like Gym's tolerant read and is counted in
    ``model_call_capture_records_unreadable``.
    """

    model_config = ConfigDict(extra="forbid")

    raw_line: str
    reason: str = Field(max_length=500)


class CaptureMarkedIncomplete(BaseModel):
    """Gym's ``<id>.capture.incomplete`` marker: a capture write failed upstream."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=500)


class CaptureCleared(BaseModel):
    """The collector's pre-dispatch clear: calls, marker and pending calls are forgotten."""

    model_config = ConfigDict(extra="forbid")


class CapturePendingAnnounced(BaseModel):
    """A model server started a call whose capture has not landed yet."""

    model_config = ConfigDict(extra="forbid")

    model_call_id: str


class CapturePendingWithdrawn(BaseModel):
    """The announced call will never be captured (e.g. the model server gave it up)."""

    model_config = ConfigDict(extra="forbid")

    model_call_id: str


def derive_captured(payload: dict[str, Any]) -> DerivedCall:
    """What ``prepare_exchange`` derives before the writer (``EventType.derive``)."""
    return derive_call(payload["exchange"])


EVENT_TYPES: list[EventType] = [
    EventType(MODEL_CALL_CAPTURED, ModelCallCaptured, derive=derive_captured),
    EventType(MODEL_CALL_DAMAGED, ModelCallDamaged),
    EventType(CAPTURE_MARKED_INCOMPLETE, CaptureMarkedIncomplete),
    EventType(CAPTURE_CLEARED, CaptureCleared),
    EventType(CAPTURE_PENDING_ANNOUNCED, CapturePendingAnnounced),
    EventType(CAPTURE_PENDING_WITHDRAWN, CapturePendingWithdrawn),
]
