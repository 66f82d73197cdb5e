"""lineage ledger projections.

Revision ID: 0003_lineage
Revises: 0002_model_calls
Create Date: 2026-11-29
"""

from collections.abc import Sequence

revision: str = "0003_lineage"
down_revision: str | None = "0002_model_calls"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
