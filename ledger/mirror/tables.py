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
    # The log's epoch when the checkpoint was written (log/epoch.py): in another epoch the same
    # seq may name other events, so the checkpoint is not trusted.
    Column("epoch", String(200), nullable=True),
)

__all__ = ["mirror_checkpoints"]
