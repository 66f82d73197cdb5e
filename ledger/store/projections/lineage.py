"""Projections of the lineage area."""

from __future__ import annotations

from ledger.store.projections.base import Projector


def projectors() -> list[Projector]:
    return []
