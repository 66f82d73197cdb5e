"""The catalogue of every event kind this ledger writes. Each area registers its module here."""

from __future__ import annotations

from ledger.events import capture, lineage, observations, rollout
from ledger.events.base import Catalogue, EventType


def default_event_types() -> list[EventType]:
    return [
        *rollout.EVENT_TYPES,
        *capture.EVENT_TYPES,
        *lineage.EVENT_TYPES,
        *observations.EVENT_TYPES,
    ]


def default_catalogue(extra: list[EventType] | None = None) -> Catalogue:
    return Catalogue([*default_event_types(), *(extra or [])])
