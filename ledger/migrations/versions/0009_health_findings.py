"""The health follower's table (each rollout's health-check outcome, derived state) and the
SQL views over it: rollout_health, rollout_health_findings, task_health (docs/sql.md).

Revision ID: 0009_health_findings
Revises: 0008_follow
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_health_findings"
down_revision: str | None = "0008_follow"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Column names are documented in docs/sql.md: keep stable. ``fresh``: the row was computed
# from the record as it is now (the routes compute the others on read).
ROLLOUT_HEALTH_VIEW = """
CREATE VIEW rollout_health AS
SELECT
    h.rollout_id, o.task_id, h.task_index, h.rollout_index, h.stage_index,
    h.verdict, h.finding_count, h.findings, h.unobserved,
    h.model_calls, h.successful_model_calls, h.model_call_errors, h.ended_on_error,
    h.duplicated_calls, h.transcript_prompt_tokens, h.transcript_completion_tokens,
    h.capture_prompt_tokens, h.capture_completion_tokens,
    h.last_seq, (h.last_seq = o.last_seq) AS fresh
FROM health_findings h JOIN observation_records o ON o.rollout_id = h.rollout_id
"""

# One row per finding of the verdict line: the JSON array unnested, per dialect.
ROLLOUT_HEALTH_FINDINGS_SQLITE = """
CREATE VIEW rollout_health_findings AS
SELECT
    h.rollout_id, o.task_id, h.task_index, h.rollout_index,
    CAST(f.key AS INTEGER) AS position,
    json_extract(f.value, '$.check') AS check_id,
    json_extract(f.value, '$.locator') AS locator,
    json_extract(f.value, '$.detail') AS detail,
    (h.last_seq = o.last_seq) AS fresh
FROM health_findings h JOIN observation_records o ON o.rollout_id = h.rollout_id,
    json_each(h.findings) f
"""
ROLLOUT_HEALTH_FINDINGS_POSTGRESQL = """
CREATE VIEW rollout_health_findings AS
SELECT
    h.rollout_id, o.task_id, h.task_index, h.rollout_index,
    CAST(f.ordinality - 1 AS INTEGER) AS position,
    f.value ->> 'check' AS check_id,
    CAST(f.value -> 'locator' AS TEXT) AS locator,
    CAST(f.value -> 'detail' AS TEXT) AS detail,
    (h.last_seq = o.last_seq) AS fresh
FROM health_findings h JOIN observation_records o ON o.rollout_id = h.rollout_id,
    json_array_elements(CAST(h.findings AS JSON)) WITH ORDINALITY AS f(value, ordinality)
"""

TASK_HEALTH_VIEW = """
CREATE VIEW task_health AS
SELECT
    h.task_index,
    COUNT(*) AS rollouts,
    SUM(CASE WHEN h.verdict = 'healthy' THEN 1 ELSE 0 END) AS healthy,
    SUM(CASE WHEN h.verdict = 'unhealthy' THEN 1 ELSE 0 END) AS unhealthy,
    SUM(CASE WHEN h.verdict = 'unobserved' THEN 1 ELSE 0 END) AS unobserved,
    SUM(h.model_calls) AS model_calls,
    SUM(h.successful_model_calls) AS successful_model_calls,
    SUM(h.model_call_errors) AS model_call_errors,
    SUM(CASE WHEN h.last_seq = o.last_seq THEN 0 ELSE 1 END) AS stale
FROM health_findings h JOIN observation_records o ON o.rollout_id = h.rollout_id
GROUP BY h.task_index
"""


def upgrade() -> None:
    op.create_table(
        "health_findings",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("task_index", sa.Text(), nullable=True),
        sa.Column("rollout_index", sa.Text(), nullable=False),
        sa.Column("stage_index", sa.Text(), nullable=True),
        sa.Column("verdict_rollout_id", sa.Text(), nullable=True),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("finding_mask", sa.Integer(), nullable=False),
        sa.Column("unobserved_mask", sa.Integer(), nullable=False),
        sa.Column("raised_mask", sa.Integer(), nullable=False),
        sa.Column("finding_count", sa.Integer(), nullable=False),
        sa.Column("issue_counts", sa.Text(), nullable=True),
        sa.Column("findings", sa.Text(), nullable=False),
        sa.Column("unobserved", sa.Text(), nullable=False),
        sa.Column("capture_observed", sa.Boolean(), nullable=False),
        sa.Column("policy_calls_observed", sa.Boolean(), nullable=False),
        sa.Column("model_calls", sa.Integer(), nullable=False),
        sa.Column("successful_model_calls", sa.Integer(), nullable=False),
        sa.Column("model_call_errors", sa.Integer(), nullable=False),
        sa.Column("errors_by_status", sa.Text(), nullable=True),
        sa.Column("ended_on_error", sa.Boolean(), nullable=False),
        sa.Column("duplicated_calls", sa.Integer(), nullable=False),
        sa.Column("transcript_prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("transcript_completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("capture_prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("capture_completion_tokens", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("rollout_id", name=op.f("pk_health_findings")),
    )
    op.create_index("ix_health_findings_last_seq", "health_findings", ["last_seq"])
    op.execute(ROLLOUT_HEALTH_VIEW)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(ROLLOUT_HEALTH_FINDINGS_POSTGRESQL)
    else:
        op.execute(ROLLOUT_HEALTH_FINDINGS_SQLITE)
    op.execute(TASK_HEALTH_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS task_health")
    op.execute("DROP VIEW IF EXISTS rollout_health_findings")
    op.execute("DROP VIEW IF EXISTS rollout_health")
    op.drop_index("ix_health_findings_last_seq", table_name="health_findings")
    op.drop_table("health_findings")
