"""The projection versions table for databases that passed through revision 0005 before 0005
made it (log/projection_versions.py).

That earlier 0005 filled its derived columns with the projection's code, so every projection
there is as its first version writes it: each is recorded at version 1 and nothing is rebuilt.
A database that went through the present 0005 has the table already; this revision leaves it
alone, and its downgrade leaves the table to 0005's.

Revision ID: 0010_projection_versions
Revises: 0009_health_findings
Create Date: 2026-12-01
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0010_projection_versions"
down_revision: str | None = "0009_health_findings"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The projections of revision 0005, all at their first version (as 0005 records them).
PROJECTIONS = ("rollouts", "captures", "lineage", "observations")
FIRST_VERSION = 1

versions = sa.table(
    "projection_versions",
    sa.column("projection", sa.String),
    sa.column("version", sa.Integer),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    bind = op.get_bind()
    if sa.inspect(bind).has_table("projection_versions"):
        return
    op.create_table(
        "projection_versions",
        sa.Column("projection", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("projection", name=op.f("pk_projection_versions")),
    )
    now = datetime.now(UTC)
    bind.execute(
        versions.insert(),
        [{"projection": name, "version": FIRST_VERSION, "updated_at": now} for name in PROJECTIONS],
    )


def downgrade() -> None:
    # The table belongs to 0005 (which drops it); a database at 0008 made by the present
    # revisions has it too.
    pass
