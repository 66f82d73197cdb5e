"""Event kinds of the lineage area: ledger rows, discarded late rows, and the removal hold."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ledger.gym.lineage import FailureRow, Identifier, check_stored_row
from ledger.log.events import EventType

ROW_RECORDED = "ledger.row_recorded"
FAILURE_RECORDED = "ledger.failure_recorded"
ROW_DISCARDED = "ledger.row_discarded"
REMOVAL_HOLD_SET = "ledger.removal_hold_set"
REMOVAL_HOLD_RELEASED = "ledger.removal_hold_released"


class RowRecorded(BaseModel):
    """A committed-call row, stored exactly as Gym writes it to ``<id>.lineage.jsonl``."""

    model_config = ConfigDict(extra="forbid")
    row: dict[str, Any]

    @field_validator("row")
    @classmethod
    def _row_shape(cls, row: dict[str, Any]) -> dict[str, Any]:
        if "failure_reason" in row:
            raise ValueError("a failure row is recorded as ledger.failure_recorded")
        check_stored_row(row)
        return row


class FailureRecorded(FailureRow):
    """A failure row: exactly ``{"failure_reason", "model_call_id"}``."""


class RowDiscarded(BaseModel):
    """A row that arrived after its rollout was retired.

    The event is written WITHOUT the event's own ``rollout_id`` (the id is in the payload):
    compaction only redacts events of ended generations that carry a rollout id, and the
    staging key must outlive compaction, since the framework sweeps orphaned staged tokens by it.
    """

    model_config = ConfigDict(extra="forbid")
    rollout_id: Identifier
    generation: int = Field(strict=True, ge=0)
    model_call_id: Identifier
    staging_key: str | None
    row: dict[str, Any]


class RemovalHoldSet(BaseModel):
    """Retire and delete answer 409 with ``reason`` until the hold is released."""

    model_config = ConfigDict(extra="forbid")
    reason: str = Field(min_length=1, max_length=2000)


class RemovalHoldReleased(BaseModel):
    model_config = ConfigDict(extra="forbid")


EVENT_TYPES: list[EventType] = [
    EventType(ROW_RECORDED, RowRecorded),
    EventType(FAILURE_RECORDED, FailureRecorded),
    EventType(ROW_DISCARDED, RowDiscarded),
    EventType(REMOVAL_HOLD_SET, RemovalHoldSet),
    EventType(REMOVAL_HOLD_RELEASED, RemovalHoldReleased),
]
