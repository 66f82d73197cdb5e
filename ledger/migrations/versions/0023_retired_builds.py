"""A build of the views that a swap replaced (or a newer upgrade superseded) is retired, not
dropped: ``view_builds.retired`` marks it, and the views' follower drops its tables afterwards
in short write transactions of their own (log/view_builds.py, "Retired builds"). Dropping them
in the swap held the log's write lock, which the appends share, for as long as it took to free
every page of the old tables.

No row changes: the database has no retired build yet.

Down: the tables of the retired builds are dropped (the code before knows nothing of them), and
their rows with them.

Revision ID: 0023_retired_builds
Revises: 0022_view_builds
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023_retired_builds"
down_revision: str | None = "0022_view_builds"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Named here, not imported: the view tables as they are at this revision.
VIEW_TABLES = (
    "capture_calls",
    "capture_call_counts",
    "observation_calls",
    "observation_records",
    "observation_tool_calls",
    "observation_gaps",
)


def upgrade() -> None:
    op.add_column(
        "view_builds",
        sa.Column("retired", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    conn = op.get_bind()
    retired = [
        int(build) for build in conn.execute(sa.text("SELECT build FROM view_builds WHERE retired"))
    ]
    for build in retired:
        for name in VIEW_TABLES:
            conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{name}_b{build}"')
    conn.execute(sa.text("DELETE FROM view_builds WHERE retired"))
    with op.batch_alter_table("view_builds") as batch:
        batch.drop_column("retired")
