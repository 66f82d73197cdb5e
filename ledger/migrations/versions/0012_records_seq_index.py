"""``observation_records`` by ``last_seq`` with the rollout's key in the index: reads that walk
the records in export order (the quality summary, the health follower, ``ledger export``) and
need only the id, generation and seq of each read the index alone, not the table, whose rows
are each rollout's whole stored record.

Revision ID: 0012_records_seq_index
Revises: 0011_run_labels
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012_records_seq_index"
down_revision: str | None = "0011_run_labels"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_observation_records_last_seq_key",
        "observation_records",
        ["last_seq", "rollout_id", "generation"],
    )
    op.drop_index("ix_observation_records_last_seq", table_name="observation_records")


def downgrade() -> None:
    op.create_index("ix_observation_records_last_seq", "observation_records", ["last_seq"])
    op.drop_index("ix_observation_records_last_seq_key", table_name="observation_records")
