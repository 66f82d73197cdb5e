"""What the views are doing: ``view_failures`` (the event a view cannot apply, and its error),
``view_checkpoints.rebuild_until`` (a view rebuilt from seq 0 after an upgrade: the head it
must reach) and the ``projection_status`` SQL view with both (docs/sql.md).

The table starts empty and the column NULL: no view has failed on an event, or is being
rebuilt, by this revision's code yet.

Revision ID: 0019_view_status
Revises: 0018_capture_positions
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_view_status"
down_revision: str | None = "0018_capture_positions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Portable SQL. Column names are documented in docs/sql.md: keep them stable. The columns of
# revision 0017's view come first, as they were.
_STATUS_HEAD = """
CREATE VIEW projection_status AS
SELECT
    p.projection, p.version,
    (c.seq IS NOT NULL) AS follows_log,
    COALESCE(c.seq, h.head_seq) AS projected_seq,
    h.head_seq,
    h.head_seq - COALESCE(c.seq, h.head_seq) AS behind,
    COALESCE(c.updated_at, p.updated_at) AS updated_at"""
_STATUS_TAIL = """
FROM projection_versions p
CROSS JOIN (SELECT COALESCE(MAX(seq), 0) AS head_seq FROM events) h
LEFT JOIN view_checkpoints c ON c.projection = p.projection"""
PROJECTION_STATUS_VIEW = (
    _STATUS_HEAD
    + """,
    c.rebuild_until,
    f.seq AS failing_seq,
    f.error AS failure,
    f.failures,
    f.first_failed_at AS failing_since"""
    + _STATUS_TAIL
    + """
LEFT JOIN view_failures f ON f.projection = p.projection
"""
)
# Revision 0017's view, which the downgrade puts back.
PROJECTION_STATUS_VIEW_0017 = _STATUS_HEAD + _STATUS_TAIL + "\n"


def upgrade() -> None:
    op.create_table(
        "view_failures",
        sa.Column("projection", sa.String(length=100), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("error", sa.String(length=500), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("first_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("projection", name=op.f("pk_view_failures")),
    )
    op.add_column("view_checkpoints", sa.Column("rebuild_until", sa.BigInteger(), nullable=True))
    op.execute("DROP VIEW projection_status")
    op.execute(PROJECTION_STATUS_VIEW)


def downgrade() -> None:
    # The view goes first: SQLite drops a column by copying the table, which a view over it
    # would refuse.
    op.execute("DROP VIEW projection_status")
    op.drop_table("view_failures")
    with op.batch_alter_table("view_checkpoints") as batch:
        batch.drop_column("rebuild_until")
    op.execute(PROJECTION_STATUS_VIEW_0017)
