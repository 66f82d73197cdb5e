"""Projection tables for the lineage area."""

from __future__ import annotations

from ledger.store.schema.base import metadata

__all__ = ["metadata"]
