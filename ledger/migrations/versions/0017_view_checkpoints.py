"""Views follow the log: ``view_checkpoints`` (how far each view has applied the log) and the
``projection_status`` SQL view (docs/sql.md).

Until this revision every projection committed with the append, so the observations view (the
first to follow the log) is at the head of the log it was written with: its checkpoint starts
there, and the projector goes on from it.

Revision ID: 0017_view_checkpoints
Revises: 0016_capture_calls_seq_index
Create Date: 2026-12-05
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0017_view_checkpoints"
down_revision: str | None = "0016_capture_calls_seq_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The projections that follow the log as of this revision, named here, not imported.
VIEWS = ("observations",)

# Portable SQL. Column names are documented in docs/sql.md: keep them stable. A projection of
# the write side has no checkpoint: it commits with the append, so it is at the head.
PROJECTION_STATUS_VIEW = """
CREATE VIEW projection_status AS
SELECT
    p.projection, p.version,
    (c.seq IS NOT NULL) AS follows_log,
    COALESCE(c.seq, h.head_seq) AS projected_seq,
    h.head_seq,
    h.head_seq - COALESCE(c.seq, h.head_seq) AS behind,
    COALESCE(c.updated_at, p.updated_at) AS updated_at
FROM projection_versions p
CROSS JOIN (SELECT COALESCE(MAX(seq), 0) AS head_seq FROM events) h
LEFT JOIN view_checkpoints c ON c.projection = p.projection
"""


def upgrade() -> None:
    table = op.create_table(
        "view_checkpoints",
        sa.Column("projection", sa.String(length=100), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("projection", name=op.f("pk_view_checkpoints")),
    )
    head = op.get_bind().execute(sa.text("SELECT COALESCE(MAX(seq), 0) FROM events")).scalar()
    now = datetime.now(UTC)
    op.bulk_insert(
        table, [{"projection": name, "seq": int(head or 0), "updated_at": now} for name in VIEWS]
    )
    op.execute(PROJECTION_STATUS_VIEW)


def downgrade() -> None:
    # The code before this revision keeps every projection at the head with each append: a
    # view behind it is marked for the rebuild ``ledger db upgrade`` runs (version 0).
    op.execute(
        "UPDATE projection_versions SET version = 0 WHERE projection IN ("
        "SELECT projection FROM view_checkpoints "
        "WHERE seq < (SELECT COALESCE(MAX(seq), 0) FROM events))"
    )
    op.execute("DROP VIEW projection_status")
    op.drop_table("view_checkpoints")
