"""The event log and the core projection (``rollouts``)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    String,
    Table,
    Text,
)

from ledger.log.metadata import metadata

# SQLite only aliases rowid for exactly "INTEGER PRIMARY KEY"; PostgreSQL wants BIGINT.
SeqType = BigInteger().with_variant(Integer(), "sqlite")

events = Table(
    "events",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("kind", String(100), nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("rollout_id", String(200), nullable=True),
    Column("generation", Integer, nullable=False),
    Column("idempotency_key", String(300), nullable=True, unique=True),
    # Canonical JSON text (sorted keys, compact): the exact bytes that were hashed.
    # NULL only after `ledger compact` redacted a deleted generation.
    Column("payload", Text, nullable=True),
    Column("payload_sha256", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
)
Index("ix_events_rollout", events.c.rollout_id, events.c.generation, events.c.seq)
Index("ix_events_kind_seq", events.c.kind, events.c.seq)

rollouts = Table(
    "rollouts",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("first_seq", BigInteger, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# The log's identity. ``epoch``: a random id set when the log is created and again when a copy
# is restored (log/epoch.py), so whatever remembers a position in the log (the mirror's
# checkpoint) can tell that seq numbers of another epoch may name other events.
log_identity = Table(
    "log_identity",
    metadata,
    Column("name", String(50), primary_key=True),
    Column("value", String(200), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
