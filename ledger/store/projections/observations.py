"""Projections of the observations area."""

from __future__ import annotations

from ledger.store.projections.base import Projector


def projectors() -> list[Projector]:
    return []
