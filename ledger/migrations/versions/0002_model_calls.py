"""model-call capture projections, the SQL views over them, and the mirror checkpoint.

Revision ID: 0002_model_calls
Revises: 0001_events
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_model_calls"
down_revision: str | None = "0001_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Portable SQL (SQLite and PostgreSQL). Column names are documented in docs/sql.md: keep stable.
MODEL_CALLS_VIEW = """
CREATE VIEW model_calls AS
SELECT
    c.rollout_id, c.generation, c.call_index, c.seq, e.recorded_at,
    c.model_call_id, c.response_id, c.client_session_id, c.model_ref_name, c.model, c.dialect,
    c.status_code, c.response_status, c.finish_reason, c.error_category,
    c.started_at, c.completed_at, c.latency_total_ms, c.latency_ttft_ms,
    c.tokens_in, c.tokens_out, c.tokens_reasoning, c.tokens_total,
    c.cached_tokens, c.cache_hit, c.cache_creation_tokens, c.num_tool_calls
FROM capture_calls c
JOIN events e ON e.seq = c.seq
WHERE NOT c.damaged
"""

# SUM ignores NULLs and is NULL when no row has a value: exactly Gym's null-aware sums.
ROLLOUT_METRICS_VIEW = """
CREATE VIEW rollout_model_call_metrics AS
SELECT
    s.rollout_id, s.generation,
    CAST(SUM(c.tokens_in) AS BIGINT) AS tokens_in,
    CAST(SUM(c.tokens_out) AS BIGINT) AS tokens_out,
    CAST(SUM(c.tokens_reasoning) AS BIGINT) AS tokens_reasoning,
    CAST(SUM(c.tokens_total) AS BIGINT) AS tokens_total,
    CAST(SUM(c.cached_tokens) AS BIGINT) AS cached_tokens,
    SUM(c.latency_total_ms) AS latency_total_ms,
    COUNT(c.call_index) AS num_calls,
    s.damaged_count, s.incomplete, s.pending_count
FROM capture_state s
LEFT JOIN capture_calls c
    ON c.rollout_id = s.rollout_id AND c.generation = s.generation AND NOT c.damaged
GROUP BY s.rollout_id, s.generation, s.damaged_count, s.incomplete, s.pending_count
"""


def upgrade() -> None:
    op.create_table(
        "capture_calls",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("call_index", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("damaged", sa.Boolean(), nullable=False),
        sa.Column("model_call_id", sa.String(length=200), nullable=True),
        sa.Column("exchange_sha256", sa.String(length=64), nullable=True),
        sa.Column("response_id", sa.Text(), nullable=True),
        sa.Column("client_session_id", sa.Text(), nullable=True),
        sa.Column("model_ref_name", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("dialect", sa.Text(), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response_status", sa.Text(), nullable=True),
        sa.Column("finish_reason", sa.Text(), nullable=True),
        sa.Column("error_category", sa.Text(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("completed_at", sa.Float(), nullable=True),
        sa.Column("latency_total_ms", sa.Float(), nullable=True),
        sa.Column("latency_ttft_ms", sa.Float(), nullable=True),
        sa.Column("tokens_in", sa.BigInteger(), nullable=True),
        sa.Column("tokens_out", sa.BigInteger(), nullable=True),
        sa.Column("tokens_reasoning", sa.BigInteger(), nullable=True),
        sa.Column("tokens_total", sa.BigInteger(), nullable=True),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_hit", sa.Boolean(), nullable=True),
        sa.Column("cache_creation_tokens", sa.BigInteger(), nullable=True),
        sa.Column("num_tool_calls", sa.Integer(), nullable=True),
        sa.Column("record", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(
            "rollout_id", "generation", "call_index", name=op.f("pk_capture_calls")
        ),
    )
    op.create_index(
        "ix_capture_calls_model_call_id",
        "capture_calls",
        ["rollout_id", "generation", "model_call_id"],
        unique=True,
    )
    op.create_table(
        "capture_state",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("next_call_index", sa.Integer(), nullable=False),
        sa.Column("record_count", sa.Integer(), nullable=False),
        sa.Column("damaged_count", sa.Integer(), nullable=False),
        sa.Column("has_evidence", sa.Boolean(), nullable=False),
        sa.Column("incomplete", sa.Boolean(), nullable=False),
        sa.Column("pending_count", sa.Integer(), nullable=False),
        sa.Column("cleared_seq", sa.BigInteger(), nullable=True),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("rollout_id", name=op.f("pk_capture_state")),
    )
    op.create_table(
        "capture_pending",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("model_call_id", sa.String(length=200), nullable=False),
        sa.Column("announced_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "rollout_id", "generation", "model_call_id", name=op.f("pk_capture_pending")
        ),
    )
    op.create_table(
        "mirror_checkpoints",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_mirror_checkpoints")),
    )
    op.execute(MODEL_CALLS_VIEW)
    op.execute(ROLLOUT_METRICS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS rollout_model_call_metrics")
    op.execute("DROP VIEW IF EXISTS model_calls")
    op.drop_table("mirror_checkpoints")
    op.drop_table("capture_pending")
    op.drop_table("capture_state")
    op.drop_index("ix_capture_calls_model_call_id", table_name="capture_calls")
    op.drop_table("capture_calls")
