"""The JSONL mirror's checkpoint. Not a projection: written by the mirror follower only."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, String, Table

from ledger.log.metadata import metadata

mirror_checkpoints = Table(
    "mirror_checkpoints",
    metadata,
    Column("name", String(100), primary_key=True),
    # Every event with seq <= this is reflected in the mirror files.
    Column("seq", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

__all__ = ["mirror_checkpoints"]
