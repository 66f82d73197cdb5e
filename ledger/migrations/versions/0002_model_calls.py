"""model-call capture projections.

Revision ID: 0002_model_calls
Revises: 0001_events
Create Date: 2026-11-29
"""

from collections.abc import Sequence

revision: str = "0002_model_calls"
down_revision: str | None = "0001_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
