"""Call evidence: ``evidence_calls`` (the projection of lineage rows, failure rows, intents and
captures by model call id) and the ``call_evidence`` view over it (docs/sql.md).

Revision ID: 0015_call_evidence
Revises: 0014_health_stored_lines
Create Date: 2026-12-04
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0015_call_evidence"
down_revision: str | None = "0014_health_stored_lines"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Portable SQL. Column names are documented in docs/sql.md: keep them stable. Only calls of a
# rollout's current generation (a delete ends the generation and its rows); ``state`` is the
# rollout's, which decides with the grace window whether an uncaptured call is pending or
# missing (the window is a setting, so that last step is the reader's: docs/gym.md).
CALL_EVIDENCE_VIEW = """
CREATE VIEW call_evidence AS
SELECT
    c.rollout_id, c.generation, c.model_call_id,
    (c.row_seq IS NOT NULL) AS has_row,
    (c.intent_seq IS NOT NULL) AS has_intent,
    (c.capture_seq IS NOT NULL) AS has_capture,
    c.row_kind, c.row_seq, c.intent_seq, c.capture_seq, c.admitted_at,
    (c.row_seq IS NOT NULL OR c.intent_seq IS NOT NULL) AS admitted,
    r.state
FROM evidence_calls c
JOIN rollouts r ON r.rollout_id = c.rollout_id AND r.generation = c.generation
"""

EVIDENCE_PROJECTION = "evidence"
FIRST_VERSION = 1
MARKED_FOR_REBUILD = 0
# The kinds the projection reads (areas/evidence/projection.py), named here, not imported.
PROJECTED_KINDS = (
    "ledger.row_recorded",
    "ledger.failure_recorded",
    "model_call.intent_recorded",
    "model_call.captured",
)


def _record_evidence_version() -> None:
    """An empty projection is the rows of a log with none of its kinds; a log with some has
    the projection marked for a rebuild from the log, which ``ledger db upgrade`` runs
    (log/rebuild.py): a migration never runs projection code."""
    conn = op.get_bind()
    kinds = sa.bindparam("kinds", list(PROJECTED_KINDS), expanding=True)
    found = conn.execute(
        sa.text("SELECT 1 FROM events WHERE kind IN :kinds LIMIT 1").bindparams(kinds)
    ).first()
    versions = sa.table(
        "projection_versions",
        sa.column("projection", sa.String),
        sa.column("version", sa.Integer),
        sa.column("updated_at", sa.DateTime(timezone=True)),
    )
    conn.execute(versions.delete().where(versions.c.projection == EVIDENCE_PROJECTION))
    conn.execute(
        versions.insert().values(
            projection=EVIDENCE_PROJECTION,
            version=FIRST_VERSION if found is None else MARKED_FOR_REBUILD,
            updated_at=datetime.now(UTC),
        )
    )


def upgrade() -> None:
    op.create_table(
        "evidence_calls",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("model_call_id", sa.String(length=200), nullable=False),
        sa.Column("row_seq", sa.BigInteger(), nullable=True),
        sa.Column("row_kind", sa.String(length=16), nullable=True),
        sa.Column("intent_seq", sa.BigInteger(), nullable=True),
        sa.Column("capture_seq", sa.BigInteger(), nullable=True),
        sa.Column("admitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint(
            "rollout_id", "generation", "model_call_id", name=op.f("pk_evidence_calls")
        ),
    )
    _record_evidence_version()
    op.execute(CALL_EVIDENCE_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS call_evidence")
    op.drop_table("evidence_calls")
    op.execute(f"DELETE FROM projection_versions WHERE projection = '{EVIDENCE_PROJECTION}'")
