"""Projection tables for the captures area."""

from __future__ import annotations

from ledger.store.schema.base import metadata

__all__ = ["metadata"]
