"""Rollout lifecycle events: the retirement fence and the generation-ending tombstone."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ledger.log.events import EventType

ROLLOUT_RETIRED = "rollout.retired"
ROLLOUT_DELETED = "rollout.deleted"


class RolloutRetired(BaseModel):
    """The fence: later rows for this generation are discarded, the manifest answers 410."""

    model_config = ConfigDict(extra="forbid")
    had_rows: bool = False


class RolloutDeleted(BaseModel):
    """The tombstone: ends the generation; the id then reads as unused."""

    model_config = ConfigDict(extra="forbid")
    had_rows: bool = False


EVENT_TYPES = [
    EventType(ROLLOUT_RETIRED, RolloutRetired),
    EventType(ROLLOUT_DELETED, RolloutDeleted),
]
