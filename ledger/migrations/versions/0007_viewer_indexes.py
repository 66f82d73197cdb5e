"""The viewer's index: rollouts by their latest event (``/ui/?sort=last_event``, newest first,
reads one page from the index instead of sorting every rollout).

Revision ID: 0007_viewer_indexes
Revises: 0006_log_epoch
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007_viewer_indexes"
down_revision: str | None = "0006_log_epoch"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_rollouts_last_seq", "rollouts", ["last_seq"])


def downgrade() -> None:
    op.drop_index("ix_rollouts_last_seq", table_name="rollouts")
