"""observation, trajectory and perf projections.

Revision ID: 0004_observations
Revises: 0003_lineage
Create Date: 2026-11-29
"""

from collections.abc import Sequence

revision: str = "0004_observations"
down_revision: str | None = "0003_lineage"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
