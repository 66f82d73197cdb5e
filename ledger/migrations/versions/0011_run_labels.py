"""Run labels (``run_labels``, the projection of ``rollout.labelled``) and the per-rollout,
per-task and per-run summary views a trainer reads (``rollout_summary``, ``task_summary``,
``run_summary``).

Revision ID: 0011_run_labels
Revises: 0010_projection_versions
Create Date: 2026-12-01
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0011_run_labels"
down_revision: str | None = "0010_projection_versions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Portable SQL (SQLite and PostgreSQL). Column names are documented in docs/sql.md: keep stable.
#
# Attempts: ``<logical>-a<n>`` (Gym's suffix, ledger/gym/ids.py) without a regex, which SQLite
# lacks: ``stem`` is the id without its trailing digits; the id has the suffix when digits were
# cut, the stem ends in ``-a`` and something precedes it. The latest attempt of a logical id
# within a run (unlabelled rollouts are one run) is the highest ``n``, on a tie the one whose
# record changed first: the rule of the health selection (areas/health/selection.py).
# Sums are cast back to BIGINT and ratios to DOUBLE PRECISION: PostgreSQL's SUM of a BIGINT and
# AVG of an integer are NUMERIC, which drivers hand out as decimals.
ROLLOUT_SUMMARY_VIEW = """
CREATE VIEW rollout_summary AS
SELECT
    a.rollout_id, a.generation, a.run_label, a.task_id, a.logical_rollout_id, a.attempt,
    (ROW_NUMBER() OVER (
        PARTITION BY a.run_label, a.logical_rollout_id ORDER BY a.attempt DESC, a.last_seq
    ) = 1) AS latest_attempt,
    a.state, a.resolved, a.has_perf, a.num_turns, a.num_model_calls, a.num_tool_calls,
    a.prompt_tokens, a.cached_prompt_tokens, a.completion_tokens, a.reasoning_tokens,
    a.latency_ms, a.token_observability_coverage, a.gap_count, a.last_seq, a.last_event_at
FROM (
    SELECT
        r.rollout_id, r.generation, l.run_label, r.task_id,
        CASE WHEN length(r.stem) < length(r.rollout_id) AND length(r.stem) > 2
                  AND substr(r.stem, length(r.stem) - 1, 2) = '-a'
             THEN substr(r.stem, 1, length(r.stem) - 2) ELSE r.rollout_id
        END AS logical_rollout_id,
        CASE WHEN length(r.stem) < length(r.rollout_id) AND length(r.stem) > 2
                  AND substr(r.stem, length(r.stem) - 1, 2) = '-a'
             THEN CAST(substr(r.rollout_id, length(r.stem) + 1) AS NUMERIC) ELSE 0
        END AS attempt,
        o.state, r.resolved, (r.num_turns IS NOT NULL) AS has_perf,
        r.num_turns, r.num_model_calls, r.num_tool_calls,
        r.prompt_tokens, r.cached_prompt_tokens, r.completion_tokens, r.reasoning_tokens,
        r.total_latency_ms AS latency_ms, r.token_observability_coverage, r.gap_count,
        r.last_seq, o.updated_at AS last_event_at
    FROM (
        SELECT observation_records.*, rtrim(rollout_id, '0123456789') AS stem
        FROM observation_records
    ) r
    JOIN rollouts o ON o.rollout_id = r.rollout_id
    LEFT JOIN run_labels l ON l.rollout_id = r.rollout_id AND l.generation = r.generation
) a
"""

# Every figure after the attempt counts is over the latest attempts only (what the health and
# perf-summary selections count); NULL when none of them has the value.
_GROUP_FIGURES = """
    COUNT(*) AS rollouts,
    SUM(CASE WHEN s.latest_attempt THEN 1 ELSE 0 END) AS latest_attempts,
    SUM(CASE WHEN s.latest_attempt THEN 0 ELSE 1 END) AS superseded_attempts,
    SUM(CASE WHEN s.latest_attempt AND s.resolved IS NOT NULL THEN 1 ELSE 0 END) AS with_result,
    SUM(CASE WHEN s.latest_attempt AND s.resolved THEN 1 ELSE 0 END) AS resolved,
    CAST(SUM(CASE WHEN s.latest_attempt AND s.resolved THEN 1 ELSE 0 END) AS DOUBLE PRECISION)
        / NULLIF(SUM(CASE WHEN s.latest_attempt AND s.resolved IS NOT NULL THEN 1 ELSE 0 END), 0)
        AS resolved_rate,
    SUM(CASE WHEN s.latest_attempt AND s.has_perf THEN 1 ELSE 0 END) AS with_perf,
    CAST(SUM(CASE WHEN s.latest_attempt THEN s.num_turns END) AS BIGINT) AS num_turns,
    CAST(SUM(CASE WHEN s.latest_attempt THEN s.num_model_calls END) AS BIGINT)
        AS num_model_calls,
    CAST(SUM(CASE WHEN s.latest_attempt THEN s.prompt_tokens END) AS BIGINT) AS prompt_tokens,
    CAST(SUM(CASE WHEN s.latest_attempt THEN s.cached_prompt_tokens END) AS BIGINT)
        AS cached_prompt_tokens,
    CAST(SUM(CASE WHEN s.latest_attempt THEN s.completion_tokens END) AS BIGINT)
        AS completion_tokens,
    CAST(SUM(CASE WHEN s.latest_attempt THEN s.reasoning_tokens END) AS BIGINT)
        AS reasoning_tokens,
    AVG(CASE WHEN s.latest_attempt THEN s.latency_ms END) AS mean_latency_ms,
    MIN(CASE WHEN s.latest_attempt THEN s.latency_ms END) AS min_latency_ms,
    MAX(CASE WHEN s.latest_attempt THEN s.latency_ms END) AS max_latency_ms,
    MAX(s.last_seq) AS last_seq
"""

TASK_SUMMARY_VIEW = f"""
CREATE VIEW task_summary AS
SELECT s.run_label, s.task_id,{_GROUP_FIGURES}
FROM rollout_summary s
GROUP BY s.run_label, s.task_id
"""

RUN_SUMMARY_VIEW = f"""
CREATE VIEW run_summary AS
SELECT s.run_label, COUNT(DISTINCT s.task_id) AS tasks,{_GROUP_FIGURES}
FROM rollout_summary s
GROUP BY s.run_label
"""


# The runs projection's first version (ledger/areas/runs/projection.py).
RUNS_PROJECTION = "runs"
FIRST_VERSION = 1
MARKED_FOR_REBUILD = 0


def _record_runs_version() -> None:
    """A log without ``rollout.labelled`` events has no labels to project: the empty table is
    the projection's rows at its first version. A log with some (it was at this revision
    before: down, then up again) has the projection marked for a rebuild from the log, which
    ``ledger db upgrade`` runs (log/rebuild.py): a migration never runs projection code."""
    conn = op.get_bind()
    labelled = conn.execute(
        sa.text("SELECT 1 FROM events WHERE kind = 'rollout.labelled' LIMIT 1")
    ).first()
    versions = sa.table(
        "projection_versions",
        sa.column("projection", sa.String),
        sa.column("version", sa.Integer),
        sa.column("updated_at", sa.DateTime(timezone=True)),
    )
    conn.execute(versions.delete().where(versions.c.projection == RUNS_PROJECTION))
    conn.execute(
        versions.insert().values(
            projection=RUNS_PROJECTION,
            version=FIRST_VERSION if labelled is None else MARKED_FOR_REBUILD,
            updated_at=datetime.now(UTC),
        )
    )


def upgrade() -> None:
    op.create_table(
        "run_labels",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("run_label", sa.String(length=200), nullable=False),
        sa.Column("labelled_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("rollout_id", name=op.f("pk_run_labels")),
    )
    op.create_index("ix_run_labels_run_label", "run_labels", ["run_label", "rollout_id"])
    _record_runs_version()
    op.execute(ROLLOUT_SUMMARY_VIEW)
    op.execute(TASK_SUMMARY_VIEW)
    op.execute(RUN_SUMMARY_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS run_summary")
    op.execute("DROP VIEW IF EXISTS task_summary")
    op.execute("DROP VIEW IF EXISTS rollout_summary")
    op.drop_index("ix_run_labels_run_label", table_name="run_labels")
    op.drop_table("run_labels")
    op.execute(f"DELETE FROM projection_versions WHERE projection = '{RUNS_PROJECTION}'")
