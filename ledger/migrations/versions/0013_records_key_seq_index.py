"""``observation_records`` by rollout id with ``last_seq`` and ``generation`` in the index:
a selection by an id glob seeks its key range and reads each record's seq (the summary's
order and freshness test) and generation (a run label's join) from the index alone, not from
the table, whose rows are each rollout's whole stored record (a page or more per row, where
the index holds a hundred keys per page).

Revision ID: 0013_records_key_seq_index
Revises: 0012_records_seq_index
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013_records_key_seq_index"
down_revision: str | None = "0012_records_seq_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_observation_records_key_seq",
        "observation_records",
        ["rollout_id", "last_seq", "generation"],
    )


def downgrade() -> None:
    op.drop_index("ix_observation_records_key_seq", table_name="observation_records")
