"""Projection tables for the observations area.

``observation_records`` is one row per rollout (its current generation): the inputs that
supersede (latest bundle, latest result), the enriched record as readers get it, and its perf
figures as columns for SQL. ``observation_calls`` keeps each captured call's trajectory entry,
its payloads left in the event (entry_payloads.py). ``observation_tool_calls`` and
``observation_gaps`` are the trajectory's tool calls and gaps, one row each, for the SQL views.
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
    false,
)

from ledger.log.metadata import metadata

observation_calls = Table(
    "observation_calls",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("call_index", Integer, primary_key=True),
    # The call's entry in ng_trajectory.model_calls (compact JSON), derived once at capture so
    # a capture-only rollout's record is put together without re-deriving every call
    # (capture_only.py). NULL: not derivable.
    Column("trajectory_entry", Text, nullable=True),
    # True: the entry's request and response are markers a read fills from the call's event
    # (entry_payloads.py); false: the entry is stored whole.
    Column("payloads_from_log", Boolean, nullable=False, server_default=false()),
)

observation_records = Table(
    "observation_records",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, nullable=False),
    # The seq of the latest event that changed this rollout's record (export filters on it).
    Column("last_seq", BigInteger, nullable=False),
    Column("bundle_seq", BigInteger, nullable=True),
    Column("bundle", Text, nullable=True),
    Column("result_seq", BigInteger, nullable=True),
    Column("result", Text, nullable=True),
    Column("task_id", Text, nullable=True),
    Column("trajectory_rollout_id", Text, nullable=True),
    Column("resolved", Boolean, nullable=True),
    Column("has_trajectory", Boolean, nullable=False),
    Column("projection_failed", Boolean, nullable=False),
    Column("num_invocations", Integer, nullable=True),
    Column("num_model_calls", Integer, nullable=True),
    Column("num_turns", Integer, nullable=True),
    Column("num_tool_calls", Integer, nullable=True),
    Column("token_observability_coverage", Float, nullable=True),
    Column("prompt_tokens", BigInteger, nullable=True),
    Column("cached_prompt_tokens", BigInteger, nullable=True),
    Column("completion_tokens", BigInteger, nullable=True),
    Column("reasoning_tokens", BigInteger, nullable=True),
    Column("total_latency_ms", Float, nullable=True),
    Column("gap_count", Integer, nullable=False),
    # The enriched record, compact JSON in Gym's key order: a read returns these bytes. When
    # ``assembled``, a template a read fills with the calls' pieces (record_pieces.py).
    Column("record", Text, nullable=False),
    Column("assembled", Boolean, nullable=False, server_default=false()),
    # True: a whole record (not ``assembled``) whose captured calls' payloads are markers a
    # read fills from their events (record_payloads_from_log.py).
    Column("payloads_from_log", Boolean, nullable=False, server_default=false()),
    # Running totals over the generation's stored calls (record_pieces.py CallTotals,
    # JSON): a capture updates them instead of reading every earlier call. NULL: no call.
    Column("call_totals", Text, nullable=True),
)
# The key in the index: walks in export order that need only (seq, id, generation) never read
# the table's rows, each a whole stored record (revision 0012).
Index(
    "ix_observation_records_last_seq_key",
    observation_records.c.last_seq,
    observation_records.c.rollout_id,
    observation_records.c.generation,
)
Index("ix_observation_records_task_id", observation_records.c.task_id)
# An id glob's key range with each record's seq and generation: the selection reads the
# index, not the records (revision 0013).
Index(
    "ix_observation_records_key_seq",
    observation_records.c.rollout_id,
    observation_records.c.last_seq,
    observation_records.c.generation,
)

observation_tool_calls = Table(
    "observation_tool_calls",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("invocation_id", Text, nullable=False),
    Column("tool_call_id", Text, nullable=False),
    Column("tool_name", Text, nullable=True),
    Column("status", String(32), nullable=False),
    Column("timing_source", String(32), nullable=True),
    Column("sandbox_id", Text, nullable=True),
    Column("started_at", Float, nullable=True),
    Column("completed_at", Float, nullable=True),
    Column("duration_ms", Float, nullable=True),
    Column("error_type", Text, nullable=True),
)

observation_gaps = Table(
    "observation_gaps",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("generation", Integer, nullable=False),
    # Which document of the record holds the gap: ng_trajectory, or (when the projection
    # failed) ng_model_call_capture / ng_agent_observations.
    Column("document", String(32), nullable=False),
    Column("code", Text, nullable=False),
    Column("invocation_id", Text, nullable=True),
    Column("detail", Text, nullable=True),
)

__all__ = [
    "metadata",
    "observation_calls",
    "observation_gaps",
    "observation_records",
    "observation_tool_calls",
]
