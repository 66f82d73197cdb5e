"""observation, trajectory and perf projections, and the SQL views over them.

Revision ID: 0004_observations
Revises: 0003_lineage
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_observations"
down_revision: str | None = "0003_lineage"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Portable SQL (SQLite and PostgreSQL). Column names are documented in docs/sql.md: keep stable.
ROLLOUT_PERF_VIEW = """
CREATE VIEW rollout_perf AS
SELECT
    r.rollout_id, r.generation, r.task_id, r.trajectory_rollout_id, r.resolved,
    r.has_trajectory, r.projection_failed,
    r.num_invocations, r.num_model_calls, r.num_turns, r.num_tool_calls,
    r.token_observability_coverage, r.prompt_tokens, r.cached_prompt_tokens,
    r.completion_tokens, r.reasoning_tokens, r.total_latency_ms,
    r.gap_count,
    (SELECT COUNT(*) FROM observation_gaps g
        WHERE g.rollout_id = r.rollout_id
        AND g.code IN ('model_call_reference_unmatched', 'model_call_reference_ambiguous',
                       'model_call_reference_conflict', 'model_call_ownership_unavailable')
    ) AS join_gap_count,
    (SELECT COUNT(*) FROM observation_gaps g
        WHERE g.rollout_id = r.rollout_id AND g.code LIKE 'model_call_capture%'
    ) AS capture_gap_count,
    r.last_seq
FROM observation_records r
"""

# duration_ms: the reported duration, else the measured interval. concurrent_tool_calls: other
# tool calls of the rollout whose [started_at, completed_at] interval overlaps this one.
ROLLOUT_TOOL_CALLS_VIEW = """
CREATE VIEW rollout_tool_calls AS
SELECT
    t.rollout_id, t.generation, t.position, t.invocation_id, t.tool_call_id, t.tool_name,
    t.status, t.timing_source, t.sandbox_id, t.error_type,
    t.started_at, t.completed_at,
    COALESCE(t.duration_ms, (t.completed_at - t.started_at) * 1000.0) AS duration_ms,
    t.duration_ms AS reported_duration_ms,
    (SELECT COUNT(*) FROM observation_tool_calls o
        WHERE o.rollout_id = t.rollout_id AND o.position <> t.position
        AND o.started_at < t.completed_at AND t.started_at < o.completed_at
    ) AS concurrent_tool_calls
FROM observation_tool_calls t
"""

ROLLOUT_GAPS_VIEW = """
CREATE VIEW rollout_gaps AS
SELECT g.rollout_id, g.generation, g.position, g.document, g.code, g.invocation_id, g.detail
FROM observation_gaps g
"""


def upgrade() -> None:
    op.create_table(
        "observation_calls",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("call_index", sa.Integer(), nullable=False),
        sa.Column("call", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint(
            "rollout_id", "generation", "call_index", name=op.f("pk_observation_calls")
        ),
    )
    op.create_table(
        "observation_records",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("bundle_seq", sa.BigInteger(), nullable=True),
        sa.Column("bundle", sa.Text(), nullable=True),
        sa.Column("result_seq", sa.BigInteger(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("task_id", sa.Text(), nullable=True),
        sa.Column("trajectory_rollout_id", sa.Text(), nullable=True),
        sa.Column("resolved", sa.Boolean(), nullable=True),
        sa.Column("has_trajectory", sa.Boolean(), nullable=False),
        sa.Column("projection_failed", sa.Boolean(), nullable=False),
        sa.Column("num_invocations", sa.Integer(), nullable=True),
        sa.Column("num_model_calls", sa.Integer(), nullable=True),
        sa.Column("num_turns", sa.Integer(), nullable=True),
        sa.Column("num_tool_calls", sa.Integer(), nullable=True),
        sa.Column("token_observability_coverage", sa.Float(), nullable=True),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cached_prompt_tokens", sa.BigInteger(), nullable=True),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=True),
        sa.Column("reasoning_tokens", sa.BigInteger(), nullable=True),
        sa.Column("total_latency_ms", sa.Float(), nullable=True),
        sa.Column("gap_count", sa.Integer(), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("rollout_id", name=op.f("pk_observation_records")),
    )
    op.create_index(
        "ix_observation_records_last_seq", "observation_records", ["last_seq"], unique=False
    )
    op.create_index(
        "ix_observation_records_task_id", "observation_records", ["task_id"], unique=False
    )
    op.create_table(
        "observation_tool_calls",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("invocation_id", sa.Text(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("timing_source", sa.String(length=32), nullable=True),
        sa.Column("sandbox_id", sa.Text(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("completed_at", sa.Float(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("error_type", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("rollout_id", "position", name=op.f("pk_observation_tool_calls")),
    )
    op.create_table(
        "observation_gaps",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("document", sa.String(length=32), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("invocation_id", sa.Text(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("rollout_id", "position", name=op.f("pk_observation_gaps")),
    )
    op.execute(ROLLOUT_PERF_VIEW)
    op.execute(ROLLOUT_TOOL_CALLS_VIEW)
    op.execute(ROLLOUT_GAPS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS rollout_gaps")
    op.execute("DROP VIEW IF EXISTS rollout_tool_calls")
    op.execute("DROP VIEW IF EXISTS rollout_perf")
    op.drop_table("observation_gaps")
    op.drop_table("observation_tool_calls")
    op.drop_index("ix_observation_records_task_id", table_name="observation_records")
    op.drop_index("ix_observation_records_last_seq", table_name="observation_records")
    op.drop_table("observation_records")
    op.drop_table("observation_calls")
