"""lineage ledger projections.

Revision ID: 0003_lineage
Revises: 0002_model_calls
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_lineage"
down_revision: str | None = "0002_model_calls"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Documented in docs/sql.md ("Lineage"); plain SQL that SQLite and PostgreSQL both accept.
VIEWS = {
    "lineage_manifest_rows": """
        SELECT l.rollout_id, l.generation, l.seq, l.row_kind, l.model_call_id,
               l.failure_reason, l.staging_key, l.parent_call_id, l.fingerprint,
               l.fingerprint_version, l.cum_len, l.chain_hash, l.response_id, l.row
        FROM lineage_rows l
        JOIN rollouts r ON r.rollout_id = l.rollout_id AND r.generation = l.generation
        WHERE r.state = 'live' AND l.row_kind IN ('call', 'failure')
    """,
    "lineage_fences": """
        SELECT r.rollout_id, r.generation, e.seq AS fenced_seq, e.recorded_at AS fenced_at
        FROM rollouts r
        JOIN events e ON e.rollout_id = r.rollout_id AND e.generation = r.generation
                     AND e.kind = 'rollout.retired'
        WHERE r.state = 'retired'
    """,
    "orphaned_staging_keys": """
        SELECT d.seq, d.rollout_id, d.generation, d.model_call_id, d.staging_key,
               d.discarded_at
        FROM lineage_discarded d
        WHERE d.staging_key IS NOT NULL
    """,
}


def upgrade() -> None:
    op.create_table(
        "lineage_rows",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("row_kind", sa.String(length=16), nullable=False),
        sa.Column("model_call_id", sa.String(length=1024), nullable=False),
        sa.Column("failure_reason", sa.String(length=1024), nullable=True),
        sa.Column("staging_key", sa.String(length=1024), nullable=True),
        sa.Column("fingerprint", sa.String(length=1024), nullable=True),
        sa.Column("fingerprint_version", sa.BigInteger(), nullable=True),
        sa.Column("parent_call_id", sa.String(length=1024), nullable=True),
        sa.Column("cum_len", sa.BigInteger(), nullable=True),
        sa.Column("chain_hash", sa.String(length=1024), nullable=True),
        sa.Column("response_id", sa.String(length=1024), nullable=True),
        sa.Column("row", sa.Text(), nullable=False),
        sa.Column("row_sha256", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("rollout_id", "generation", "seq", name=op.f("pk_lineage_rows")),
    )
    op.create_index(
        "ix_lineage_rows_fingerprint",
        "lineage_rows",
        ["rollout_id", "generation", "fingerprint"],
    )
    op.create_index(
        "ix_lineage_rows_model_call",
        "lineage_rows",
        ["rollout_id", "generation", "model_call_id"],
    )
    op.create_table(
        "lineage_discarded",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("model_call_id", sa.String(length=1024), nullable=False),
        sa.Column("staging_key", sa.String(length=1024), nullable=True),
        sa.Column("discarded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("row", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_lineage_discarded")),
    )
    op.create_table(
        "lineage_removal_hold",
        sa.Column("hold_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("set_seq", sa.BigInteger(), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("hold_id", name=op.f("pk_lineage_removal_hold")),
    )
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    for name in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {name}")
    op.drop_table("lineage_removal_hold")
    op.drop_table("lineage_discarded")
    op.drop_index("ix_lineage_rows_model_call", table_name="lineage_rows")
    op.drop_index("ix_lineage_rows_fingerprint", table_name="lineage_rows")
    op.drop_table("lineage_rows")
