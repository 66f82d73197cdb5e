"""The append records a capture's position; the capture view derives the rest behind it.

``capture_positions`` (the write side: a position's identity, what idempotency decides on) is
copied from ``capture_calls``, which becomes a view that follows the log (the normalised columns
and the record, derived from each event); ``capture_state``'s record and damaged counts move to
the view's ``capture_call_counts``, since telling a record from a damaged exchange is the
derivation's. The rows are moved, not derived, so no projection's code is needed here: the
capture view was at the head with the append, so its checkpoint starts there.

Revision ID: 0018_capture_positions
Revises: 0017_view_checkpoints
Create Date: 2026-12-05
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0018_capture_positions"
down_revision: str | None = "0017_view_checkpoints"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The projections' names and the versions whose rows this revision's copies are, named here,
# not imported: the write side's ``captures`` from version 1 to 2, the view ``capture_calls`` 1.
WRITE_SIDE = "captures"
VIEW = "capture_calls"
WRITE_SIDE_BEFORE, WRITE_SIDE_AFTER, VIEW_VERSION = 1, 2, 1
HEAD = "SELECT COALESCE(MAX(seq), 0) FROM events"

# The SQL view over ``capture_state`` (docs/sql.md; same name and columns): its damaged count
# now comes from the capture view's counts. Before: as revision 0002 wrote it.
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
    COALESCE(k.damaged_count, 0) AS damaged_count, s.incomplete, s.pending_count
FROM capture_state s
LEFT JOIN capture_call_counts k
    ON k.rollout_id = s.rollout_id AND k.generation = s.generation
LEFT JOIN capture_calls c
    ON c.rollout_id = s.rollout_id AND c.generation = s.generation AND NOT c.damaged
GROUP BY s.rollout_id, s.generation, k.damaged_count, s.incomplete, s.pending_count
"""
ROLLOUT_METRICS_VIEW_BEFORE = """
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


def _recorded_version(name: str) -> int | None:
    value = (
        op.get_bind()
        .execute(
            sa.text("SELECT version FROM projection_versions WHERE projection = :name"),
            {"name": name},
        )
        .scalar()
    )
    return None if value is None else int(value)


def _record_version(name: str, version: int) -> None:
    bind = op.get_bind()
    bind.execute(
        sa.text("DELETE FROM projection_versions WHERE projection = :name"), {"name": name}
    )
    bind.execute(
        sa.text(
            "INSERT INTO projection_versions (projection, version, updated_at) "
            "VALUES (:name, :version, :now)"
        ),
        {"name": name, "version": version, "now": datetime.now(UTC)},
    )


def upgrade() -> None:
    op.create_table(
        "capture_positions",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("call_index", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("model_call_id", sa.String(length=200), nullable=True),
        sa.Column("exchange_sha256", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint(
            "rollout_id", "generation", "call_index", name=op.f("pk_capture_positions")
        ),
    )
    op.execute(
        "INSERT INTO capture_positions "
        "(rollout_id, generation, call_index, seq, model_call_id, exchange_sha256) "
        "SELECT rollout_id, generation, call_index, seq, model_call_id, exchange_sha256 "
        "FROM capture_calls"
    )
    op.create_index(
        "ix_capture_positions_model_call_id",
        "capture_positions",
        ["rollout_id", "generation", "model_call_id"],
        unique=True,
    )
    op.create_index("ix_capture_positions_seq", "capture_positions", ["seq"])
    op.create_table(
        "capture_call_counts",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("record_count", sa.Integer(), nullable=False),
        sa.Column("damaged_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("rollout_id", name=op.f("pk_capture_call_counts")),
    )
    # The view keeps a count row for a rollout generation once it has a position or a clear:
    # a rollout with only a marker or pending calls has none.
    op.execute(
        "INSERT INTO capture_call_counts (rollout_id, generation, record_count, damaged_count) "
        "SELECT rollout_id, generation, record_count, damaged_count FROM capture_state "
        "WHERE next_call_index > 0 OR cleared_seq IS NOT NULL"
    )
    op.execute("DROP VIEW rollout_model_call_metrics")
    with op.batch_alter_table("capture_state") as batch:
        batch.drop_column("record_count")
        batch.drop_column("damaged_count")
    op.execute(ROLLOUT_METRICS_VIEW)
    # The copies are the new versions' rows only if the old rows were current; else both
    # are rebuilt (version 0), as for any stale projection. No row: nothing was recorded yet
    # (a database being created), and none is now.
    recorded = _recorded_version(WRITE_SIDE)
    if recorded is not None:
        current = recorded == WRITE_SIDE_BEFORE
        _record_version(WRITE_SIDE, WRITE_SIDE_AFTER if current else 0)
        _record_version(VIEW, VIEW_VERSION if current else 0)
    head = op.get_bind().execute(sa.text(HEAD)).scalar()
    op.get_bind().execute(
        sa.text(
            "INSERT INTO view_checkpoints (projection, seq, updated_at) VALUES (:name, :seq, :now)"
        ),
        {"name": VIEW, "seq": int(head or 0), "now": datetime.now(UTC)},
    )


def downgrade() -> None:
    bind = op.get_bind()
    behind = bind.execute(
        sa.text(
            f"SELECT COUNT(*) FROM view_checkpoints WHERE projection = :name AND seq < ({HEAD})"
        ),
        {"name": VIEW},
    ).scalar()
    op.execute("DROP VIEW rollout_model_call_metrics")
    with op.batch_alter_table("capture_state") as batch:
        batch.add_column(
            sa.Column("record_count", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("damaged_count", sa.Integer(), nullable=False, server_default="0")
        )
    for column in ("record_count", "damaged_count"):
        op.execute(
            f"UPDATE capture_state SET {column} = COALESCE((SELECT c.{column} "
            "FROM capture_call_counts c WHERE c.rollout_id = capture_state.rollout_id "
            "AND c.generation = capture_state.generation), 0)"
        )
    with op.batch_alter_table("capture_state") as batch:
        batch.alter_column("record_count", server_default=None)
        batch.alter_column("damaged_count", server_default=None)
    op.execute(ROLLOUT_METRICS_VIEW_BEFORE)
    if behind:
        # The code before decides against ``capture_calls``: it gets exactly the write side's
        # positions (rows the view had not reached without their derived columns, until the
        # rebuild the version 0 below asks for), so no decision is made against missing rows.
        op.execute(
            "DELETE FROM capture_calls WHERE NOT EXISTS (SELECT 1 FROM capture_positions p "
            "WHERE p.rollout_id = capture_calls.rollout_id "
            "AND p.generation = capture_calls.generation "
            "AND p.call_index = capture_calls.call_index AND p.seq = capture_calls.seq)"
        )
        op.execute(
            "INSERT INTO capture_calls "
            "(rollout_id, generation, call_index, seq, damaged, model_call_id, exchange_sha256) "
            "SELECT p.rollout_id, p.generation, p.call_index, p.seq, FALSE, p.model_call_id, "
            "p.exchange_sha256 FROM capture_positions p WHERE NOT EXISTS (SELECT 1 "
            "FROM capture_calls c WHERE c.rollout_id = p.rollout_id "
            "AND c.generation = p.generation AND c.call_index = p.call_index)"
        )
    op.drop_table("capture_call_counts")
    op.drop_index("ix_capture_positions_seq", table_name="capture_positions")
    op.drop_index("ix_capture_positions_model_call_id", table_name="capture_positions")
    op.drop_table("capture_positions")
    bind.execute(sa.text("DELETE FROM view_checkpoints WHERE projection = :name"), {"name": VIEW})
    bind.execute(
        sa.text("DELETE FROM projection_versions WHERE projection = :name"), {"name": VIEW}
    )
    # The code before this revision keeps ``capture_calls`` with the append: rows the view had
    # not reached yet are rebuilt by ``ledger db upgrade`` (version 0).
    recorded = _recorded_version(WRITE_SIDE)
    if recorded is not None:
        current = recorded == WRITE_SIDE_AFTER and not behind
        _record_version(WRITE_SIDE, WRITE_SIDE_BEFORE if current else 0)
