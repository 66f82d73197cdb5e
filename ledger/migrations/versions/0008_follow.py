"""The capture-directory follower's per-file checkpoints (``ledger import --follow``,
``ledger serve --follow-capture-dir``).

Revision ID: 0008_follow
Revises: 0007_viewer_indexes
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_follow"
down_revision: str | None = "0007_viewer_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "capture_follow_files",
        sa.Column("directory", sa.String(length=1024), nullable=False),
        sa.Column("file_name", sa.String(length=300), nullable=False),
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("identity", sa.String(length=64), nullable=False),
        sa.Column("head_sha256", sa.String(length=64), nullable=False),
        sa.Column("head_length", sa.BigInteger(), nullable=False),
        sa.Column("byte_offset", sa.BigInteger(), nullable=False),
        sa.Column("lines", sa.BigInteger(), nullable=False),
        sa.Column("serial", sa.String(length=32), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("directory", "file_name", name=op.f("pk_capture_follow_files")),
    )
    op.create_index(
        "ix_capture_follow_files_rollout",
        "capture_follow_files",
        ["directory", "rollout_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_capture_follow_files_rollout", table_name="capture_follow_files")
    op.drop_table("capture_follow_files")
