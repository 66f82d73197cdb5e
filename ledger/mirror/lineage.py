"""The lineage files of the mirror."""

from __future__ import annotations

from ledger.mirror.base import MirrorArea


def areas() -> list[MirrorArea]:
    return []
