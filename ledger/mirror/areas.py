"""The areas the mirror follower keeps, in the order it applies each event to them."""

from __future__ import annotations

from ledger.mirror import captures, lineage
from ledger.mirror.base import MirrorArea


def default_areas() -> list[MirrorArea]:
    return [*captures.areas(), *lineage.areas()]
