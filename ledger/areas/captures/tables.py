"""Projection tables for the captures area.

The write side (commands decide against these, they commit with the append):
``capture_positions`` holds one row per durable position (``call_index``) of each rollout's
current generation since its last clear, with what idempotency needs (``model_call_id`` and the
event's ``payload_sha256``); ``capture_state`` one row per rollout (the next position, the
marker, pending calls); ``capture_pending`` the calls announced and not yet captured.

The view (follows the log behind the acknowledgement, ``calls_view.py``): ``capture_calls``,
the same positions with the normalised columns for SQL and the record without payloads for
reads, and ``capture_call_counts``, how many positions of a rollout are records and how many
are damaged (Gym's merge gaps). Payloads stay in the event (joined by ``seq``), so they are
stored once.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
)

from ledger.log.metadata import metadata

capture_positions = Table(
    "capture_positions",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("call_index", Integer, primary_key=True),
    Column("seq", BigInteger, nullable=False),
    # NULL for a position whose line was not an exchange (``model_call.damaged``).
    Column("model_call_id", String(200), nullable=True),
    Column("exchange_sha256", String(64), nullable=True),
)
# Idempotency on model_call_id within the generation (NULLs never clash).
Index(
    "ix_capture_positions_model_call_id",
    capture_positions.c.rollout_id,
    capture_positions.c.generation,
    capture_positions.c.model_call_id,
    unique=True,
)
# The view finds the position of each capture event it applies.
Index("ix_capture_positions_seq", capture_positions.c.seq)

capture_calls = Table(
    "capture_calls",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("call_index", Integer, primary_key=True),
    Column("seq", BigInteger, nullable=False),
    # True for a position whose line is not a record (not an object, or not buildable).
    Column("damaged", Boolean, nullable=False),
    Column("model_call_id", String(200), nullable=True),
    Column("exchange_sha256", String(64), nullable=True),
    Column("response_id", Text, nullable=True),
    Column("client_session_id", Text, nullable=True),
    Column("model_ref_name", Text, nullable=True),
    Column("model", Text, nullable=True),
    Column("dialect", Text, nullable=True),
    Column("status_code", Integer, nullable=True),
    Column("response_status", Text, nullable=True),
    Column("finish_reason", Text, nullable=True),
    Column("error_category", Text, nullable=True),
    Column("started_at", Float, nullable=True),
    Column("completed_at", Float, nullable=True),
    Column("latency_total_ms", Float, nullable=True),
    Column("latency_ttft_ms", Float, nullable=True),
    Column("tokens_in", BigInteger, nullable=True),
    Column("tokens_out", BigInteger, nullable=True),
    Column("tokens_reasoning", BigInteger, nullable=True),
    Column("tokens_total", BigInteger, nullable=True),
    Column("cached_tokens", BigInteger, nullable=True),
    Column("cache_hit", Boolean, nullable=True),
    Column("cache_creation_tokens", BigInteger, nullable=True),
    Column("num_tool_calls", Integer, nullable=True),
    # The ModelCallRecord as compact JSON without the payload keys; NULL for damaged positions.
    Column("record", Text, nullable=True),
)
# One row per model_call_id of a generation, as in ``capture_positions`` (NULLs never clash).
Index(
    "ix_capture_calls_model_call_id",
    capture_calls.c.rollout_id,
    capture_calls.c.generation,
    capture_calls.c.model_call_id,
    unique=True,
)
# The row of a capture event (the viewer's live tail shows each capture's status).
Index("ix_capture_calls_seq", capture_calls.c.seq)

capture_state = Table(
    "capture_state",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("next_call_index", Integer, nullable=False),
    # Gym's "a capture file or marker exists" (false again after a clear).
    Column("has_evidence", Boolean, nullable=False),
    Column("incomplete", Boolean, nullable=False),
    Column("pending_count", Integer, nullable=False),
    Column("cleared_seq", BigInteger, nullable=True),
    Column("last_seq", BigInteger, nullable=False),
)

capture_call_counts = Table(
    "capture_call_counts",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("record_count", Integer, nullable=False),
    Column("damaged_count", Integer, nullable=False),
)

capture_pending = Table(
    "capture_pending",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("model_call_id", String(200), primary_key=True),
    Column("announced_seq", BigInteger, nullable=False),
)

__all__ = [
    "capture_call_counts",
    "capture_calls",
    "capture_pending",
    "capture_positions",
    "capture_state",
    "metadata",
]
