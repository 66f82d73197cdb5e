"""``health_findings``: each rollout's health-check outcome, kept right after the append by the
health follower (follower.py), one row per rollout.

Derived state, not a projection: a row is computed from the rollout's stored record as of
``last_seq`` (``observation_records.last_seq`` when it was computed). A reader trusts a row only
while the two seqs are equal; otherwise (a row missing or stale) it checks the record itself,
so an answer is never older than the record it returns (service.py).

Every column is independent of where the record falls in a selection: a record without
``_ng_task_index`` (whose default task index is its position) has ``task_index`` NULL, and one
whose verdict-line id would be derived from that index has ``verdict_rollout_id`` NULL; both
are resolved when a selection is summarised.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
)

from ledger.log.metadata import metadata

health_findings = Table(
    "health_findings",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    # observation_records.last_seq of the record this row was computed from.
    Column("last_seq", BigInteger, nullable=False),
    # Gym's identity, as compact JSON of the record's values (NULL: key absent / null).
    Column("task_index", Text, nullable=True),
    Column("rollout_index", Text, nullable=False),
    Column("stage_index", Text, nullable=True),
    # The "rollout_id" of the verdict line (NULL: derived from the task index, see above).
    Column("verdict_rollout_id", Text, nullable=True),
    # The record's own verdict with no check ignored, before the run-level checks.
    Column("verdict", String(16), nullable=False),
    # Bit i: ROLLOUT_CHECKS[i] found something / lacked its input / raised.
    Column("finding_mask", Integer, nullable=False),
    Column("unobserved_mask", Integer, nullable=False),
    Column("raised_mask", Integer, nullable=False),
    Column("finding_count", Integer, nullable=False),
    # JSON object check -> findings of that check (NULL: none): the summary's issues.
    Column("issue_counts", Text, nullable=True),
    # The verdict line's "findings" and "unobserved" arrays, compact JSON as Gym writes them.
    Column("findings", Text, nullable=False),
    Column("unobserved", Text, nullable=False),
    # What the quality summary's stats and task checks add up.
    Column("capture_observed", Boolean, nullable=False),
    Column("policy_calls_observed", Boolean, nullable=False),
    Column("model_calls", Integer, nullable=False),
    Column("successful_model_calls", Integer, nullable=False),
    Column("model_call_errors", Integer, nullable=False),
    # JSON object status -> failed calls (NULL: none failed).
    Column("errors_by_status", Text, nullable=True),
    Column("ended_on_error", Boolean, nullable=False),
    Column("duplicated_calls", Integer, nullable=False),
    Column("transcript_prompt_tokens", BigInteger, nullable=False),
    Column("transcript_completion_tokens", BigInteger, nullable=False),
    Column("capture_prompt_tokens", BigInteger, nullable=False),
    Column("capture_completion_tokens", BigInteger, nullable=False),
    # What a selection's summary reads instead of the columns above (row_figures.py): the
    # verdict line's UTF-8 bytes (NULL: its rollout id is derived from the positional task
    # index; a record without _ng_task_index has the bytes after that key's value), and the
    # figures with the line's offsets as little-endian int64s (NULL: one would not fit).
    Column("verdict_line", LargeBinary, nullable=True),
    Column("figures", LargeBinary, nullable=True),
)
Index("ix_health_findings_last_seq", health_findings.c.last_seq)

__all__ = ["health_findings"]
