"""Event kinds of the capture area."""

from __future__ import annotations

from ledger.events.base import EventType

EVENT_TYPES: list[EventType] = []
