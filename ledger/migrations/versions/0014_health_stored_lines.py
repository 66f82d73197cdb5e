"""``health_findings.verdict_line`` and ``.figures``: each row's verdict line as the bytes it is
written as, and the figures a selection's summary adds up packed in one value
(areas/health/row_figures.py), so a summary fetches nine values a row instead of twenty-one.

The rows are derived state (the health follower computes them from the stored records), so
the upgrade empties the table rather than computing the new columns here: a migration runs no
live checking code. The follower starts over from the first record; until it has caught up,
answers check the records themselves (the freshness rule), as for any record without a row.

Revision ID: 0014_health_stored_lines
Revises: 0013_records_key_seq_index
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_health_stored_lines"
down_revision: str | None = "0013_records_key_seq_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DELETE FROM health_findings")
    # Plain ALTER TABLE on both backends (SQLite 3.35+ drops columns too): a batch would copy
    # the table, which the health views refuse on SQLite.
    op.add_column("health_findings", sa.Column("verdict_line", sa.LargeBinary(), nullable=True))
    op.add_column("health_findings", sa.Column("figures", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    # The rows stay: every column the earlier revision has is still computed from the record.
    op.drop_column("health_findings", "figures")
    op.drop_column("health_findings", "verdict_line")
