"""The one event kind of the runs area: ``rollout.labelled``.

Appended in the same command as the capture, observations or result whose request named the
run (``?run=LABEL``), and only when the rollout's generation had no label yet: the payloads of
the other kinds stay exactly as they were.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from ledger.areas.runs.labels import MAX_RUN_LABEL_LENGTH, RUN_LABEL_PATTERN
from ledger.log.events import EventType

ROLLOUT_LABELLED = "rollout.labelled"


class RolloutLabelled(BaseModel):
    """The rollout's current generation belongs to run ``run``."""

    model_config = ConfigDict(extra="forbid")

    run: Annotated[
        str, Field(min_length=1, max_length=MAX_RUN_LABEL_LENGTH, pattern=RUN_LABEL_PATTERN)
    ]


EVENT_TYPES: list[EventType] = [EventType(ROLLOUT_LABELLED, RolloutLabelled)]
