"""Projection tables for the lineage area. Everything a rollout read touches is keyed by
``(rollout_id, generation)``, so reads cost the same whatever the size of the log.

Fences have no table of their own: a fence is the ``rollouts`` state ``retired`` plus its
``rollout.retired`` event (the ``lineage_fences`` view joins them), which keeps a retire of 4096
ids at the fewest writes per id."""

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

# Each rollout's ledger rows in ledger order (seq): committed calls, failures, lineage-only rows.
lineage_rows = Table(
    "lineage_rows",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    # "call" (committed, with custody columns), "lineage" (no custody columns), "failure".
    Column("row_kind", String(16), nullable=False),
    Column("model_call_id", String(1024), nullable=False),
    Column("failure_reason", String(1024), nullable=True),
    Column("staging_key", String(1024), nullable=True),
    Column("fingerprint", String(1024), nullable=True),
    Column("fingerprint_version", BigInteger, nullable=True),
    Column("parent_call_id", String(1024), nullable=True),
    Column("cum_len", BigInteger, nullable=True),
    Column("chain_hash", String(1024), nullable=True),
    Column("response_id", String(1024), nullable=True),
    # The row exactly as recorded (canonical JSON): the manifest and the mirror are built from it.
    Column("row", Text, nullable=False),
    Column("row_sha256", String(64), nullable=False),
)
# Parent resolution: a model server looks a committed call up by fingerprint or by id.
Index(
    "ix_lineage_rows_fingerprint",
    lineage_rows.c.rollout_id,
    lineage_rows.c.generation,
    lineage_rows.c.fingerprint,
)
Index(
    "ix_lineage_rows_model_call",
    lineage_rows.c.rollout_id,
    lineage_rows.c.generation,
    lineage_rows.c.model_call_id,
)

# Late rows discarded by a fence, in seq order: their staging keys name staged tokens that no
# manifest references, which the framework must sweep (``after=SEQ`` pages through them).
lineage_discarded = Table(
    "lineage_discarded",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("rollout_id", String(200), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("model_call_id", String(1024), nullable=False),
    Column("staging_key", String(1024), nullable=True),
    Column("discarded_at", DateTime(timezone=True), nullable=False),
    Column("row", Text, nullable=False),
)

# The operator's removal hold: at most one row (hold_id = 1) while removals are refused.
lineage_removal_hold = Table(
    "lineage_removal_hold",
    metadata,
    Column("hold_id", Integer, primary_key=True, autoincrement=False),
    Column("reason", Text, nullable=False),
    Column("set_seq", BigInteger, nullable=False),
    Column("set_at", DateTime(timezone=True), nullable=False),
)

__all__ = [
    "lineage_discarded",
    "lineage_removal_hold",
    "lineage_rows",
    "metadata",
]
