"""``capture_calls`` by ``seq``: the viewer's live tail shows each capture event's status (a 429
must not look like a 200), which is the projected row of that event; without this index
finding it is a scan of every call.

Revision ID: 0016_capture_calls_seq_index
Revises: 0015_call_evidence
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016_capture_calls_seq_index"
down_revision: str | None = "0015_call_evidence"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_capture_calls_seq", "capture_calls", ["seq"])


def downgrade() -> None:
    op.drop_index("ix_capture_calls_seq", table_name="capture_calls")
