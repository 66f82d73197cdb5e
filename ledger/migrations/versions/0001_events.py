"""The event log, its immutability triggers, and the rollouts projection.

Revision ID: 0001_events
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_events"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    "seq",
    "recorded_at",
    "kind",
    "schema_version",
    "rollout_id",
    "generation",
    "idempotency_key",
    "payload_sha256",
    "hash",
)

# The one permitted change: compaction redacts (sets NULL) the payload of an event whose
# generation has ended (the rollout's current generation is higher). Everything else is refused.
_SQLITE_UNCHANGED = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in _COLUMNS)
SQLITE_TRIGGERS = [
    """
    CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE is refused'); END
    """,
    f"""
    CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
    WHEN NOT (
        NEW.payload IS NULL AND OLD.payload IS NOT NULL AND {_SQLITE_UNCHANGED}
        AND OLD.rollout_id IS NOT NULL
        AND EXISTS (SELECT 1 FROM rollouts r
                    WHERE r.rollout_id = OLD.rollout_id AND r.generation > OLD.generation)
    )
    BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE is refused'); END
    """,
]

_PG_UNCHANGED = ", ".join(f"NEW.{c}" for c in _COLUMNS)
_PG_OLD = ", ".join(f"OLD.{c}" for c in _COLUMNS)
POSTGRES_TRIGGERS = [
    f"""
    CREATE FUNCTION ledger_events_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE'
           AND NEW.payload IS NULL AND OLD.payload IS NOT NULL
           AND ({_PG_UNCHANGED}) IS NOT DISTINCT FROM ({_PG_OLD})
           AND OLD.rollout_id IS NOT NULL
           AND EXISTS (SELECT 1 FROM rollouts r
                       WHERE r.rollout_id = OLD.rollout_id AND r.generation > OLD.generation)
        THEN
            RETURN NEW;
        END IF;
        IF TG_OP = 'UPDATE' THEN
            RAISE EXCEPTION 'events are immutable: UPDATE is refused';
        END IF;
        RAISE EXCEPTION 'events are append-only: % is refused', TG_OP;
    END
    $$
    """,
    """
    CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
    FOR EACH ROW EXECUTE FUNCTION ledger_events_guard()
    """,
    """
    CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION ledger_events_guard()
    """,
    """
    CREATE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_events_guard()
    """,
]


def upgrade() -> None:
    seq_type = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "events",
        sa.Column("seq", seq_type, autoincrement=False, nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("rollout_id", sa.String(length=200), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=300), nullable=True),
        sa.Column("payload", sa.Text(), nullable=True),
        sa.Column("payload_sha256", sa.String(length=64), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_events")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_events_idempotency_key")),
    )
    op.create_index("ix_events_rollout", "events", ["rollout_id", "generation", "seq"])
    op.create_index("ix_events_kind_seq", "events", ["kind", "seq"])
    op.create_table(
        "rollouts",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("first_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("rollout_id", name=op.f("pk_rollouts")),
    )
    statements = SQLITE_TRIGGERS if op.get_bind().dialect.name == "sqlite" else POSTGRES_TRIGGERS
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS events_refuse_truncate ON events")
        op.execute("DROP TRIGGER IF EXISTS events_refuse_delete ON events")
        op.execute("DROP TRIGGER IF EXISTS events_refuse_update ON events")
        op.execute("DROP FUNCTION IF EXISTS ledger_events_guard()")
    else:
        op.execute("DROP TRIGGER IF EXISTS events_refuse_delete")
        op.execute("DROP TRIGGER IF EXISTS events_refuse_update")
    op.drop_table("rollouts")
    op.drop_index("ix_events_kind_seq", table_name="events")
    op.drop_index("ix_events_rollout", table_name="events")
    op.drop_table("events")
