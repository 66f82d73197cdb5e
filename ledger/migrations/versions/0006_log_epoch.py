"""The log's identity (an epoch, new at creation and at restore) and the epoch of the mirror's
checkpoint, so a checkpoint of another epoch is not trusted (log/epoch.py).

An existing log gets its epoch here; an existing checkpoint gets that same epoch (it was taken
on this log), so upgrading does not make the mirror rebuild.

Revision ID: 0006_log_epoch
Revises: 0005_trajectory_entries
Create Date: 2026-12-01
"""

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0006_log_epoch"
down_revision: str | None = "0005_trajectory_entries"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log_identity = sa.table(
    "log_identity",
    sa.column("name", sa.String),
    sa.column("value", sa.String),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)
mirror_checkpoints = sa.table("mirror_checkpoints", sa.column("epoch", sa.String))


def upgrade() -> None:
    op.create_table(
        "log_identity",
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_log_identity")),
    )
    epoch = uuid.uuid4().hex
    op.execute(
        log_identity.insert().values(name="epoch", value=epoch, updated_at=datetime.now(UTC))
    )
    with op.batch_alter_table("mirror_checkpoints") as batch:
        batch.add_column(sa.Column("epoch", sa.String(length=200), nullable=True))
    op.execute(mirror_checkpoints.update().values(epoch=epoch))


def downgrade() -> None:
    with op.batch_alter_table("mirror_checkpoints") as batch:
        batch.drop_column("epoch")
    op.drop_table("log_identity")
