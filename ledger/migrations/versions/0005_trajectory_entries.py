"""Capture-only records kept as templates: each call's ng_trajectory entry derived once
(observation_calls.trajectory_entry), observation_records.assembled and the running
observation_records.call_totals (areas/observations/record_pieces.py); and the table that
records which version of each projection built its rows (log/projection_versions.py).

The new columns are derived rows, so this revision does not fill them: it would need the
observations projection's code, and a migration never imports live projection code (its
behaviour would change whenever that code does). Where the observations tables hold rows, it
marks the projection for rebuild (version 0) instead; ``ledger db upgrade`` then rebuilds the
projections from the log with the running code (log/rebuild.py). The downgrade needs no
projection code: filling a template is two text substitutions, frozen here as they are at this
revision.

Revision ID: 0005_trajectory_entries
Revises: 0004_observations
Create Date: 2026-11-30
"""

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0005_trajectory_entries"
down_revision: str | None = "0004_observations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The projections there are at this revision, each at its first version; 0: rebuild it.
PROJECTIONS = ("rollouts", "captures", "lineage", "observations")
FIRST_VERSION = 1
MARKED_FOR_REBUILD = 0
# Rollouts are read in pages of this many (keyset order), so memory stays flat.
PAGE = 1000
# The markers a template holds in place of its two lists (JSON string literals, as stored).
CALLS_MARKER = '"\\u0000ledger:capture-calls\\u0000"'
MODEL_CALLS_MARKER = '"\\u0000ledger:trajectory-model-calls\\u0000"'

calls = sa.table(
    "observation_calls",
    sa.column("rollout_id", sa.String),
    sa.column("generation", sa.Integer),
    sa.column("call_index", sa.Integer),
    sa.column("trajectory_entry", sa.Text),
)
capture_calls = sa.table(
    "capture_calls",
    sa.column("rollout_id", sa.String),
    sa.column("generation", sa.Integer),
    sa.column("call_index", sa.Integer),
    sa.column("record", sa.Text),
)
records = sa.table(
    "observation_records",
    sa.column("rollout_id", sa.String),
    sa.column("generation", sa.Integer),
    sa.column("record", sa.Text),
    sa.column("assembled", sa.Boolean),
)
versions = sa.table(
    "projection_versions",
    sa.column("projection", sa.String),
    sa.column("version", sa.Integer),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)


def create_versions_table() -> None:
    # 0010 makes the same table for a database that passed through this revision before it
    # did (that earlier 0005 filled the new columns itself, so 0010 marks nothing).
    op.create_table(
        "projection_versions",
        sa.Column("projection", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("projection", name=op.f("pk_projection_versions")),
    )


def record_versions(bind: sa.Connection, *, stale: frozenset[str] = frozenset()) -> None:
    now = datetime.now(UTC)
    bind.execute(
        versions.insert(),
        [
            {
                "projection": name,
                "version": MARKED_FOR_REBUILD if name in stale else FIRST_VERSION,
                "updated_at": now,
            }
            for name in PROJECTIONS
        ],
    )


def upgrade() -> None:
    # Plain ADD COLUMN (no batch table copy on SQLite: the views of 0004 read these tables).
    op.add_column("observation_calls", sa.Column("trajectory_entry", sa.Text(), nullable=True))
    op.add_column(
        "observation_records",
        sa.Column("assembled", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("observation_records", sa.Column("call_totals", sa.Text(), nullable=True))
    create_versions_table()
    bind = op.get_bind()
    has_rows = any(
        bind.execute(sa.select(sa.literal(1)).select_from(table).limit(1)).first() is not None
        for table in (calls, records)
    )
    # Rows written before this revision lack what the projection now derives for every call
    # and record: `ledger verify` would report them. The rebuild writes them from the log.
    record_versions(bind, stale=frozenset({"observations"}) if has_rows else frozenset())


def _templates(bind: sa.Connection) -> Iterator[str]:
    """The rollout ids whose record is a template, in id order, a page at a time (the caller
    turns them into whole records, so the keyset moves on past the ones it changed)."""
    after: str | None = None
    while True:
        query = sa.select(records.c.rollout_id).where(records.c.assembled == sa.true())
        if after is not None:
            query = query.where(records.c.rollout_id > after)
        ids = [
            str(row[0]) for row in bind.execute(query.order_by(records.c.rollout_id).limit(PAGE))
        ]
        yield from ids
        if len(ids) < PAGE:
            return
        after = ids[-1]


def _whole_record(bind: sa.Connection, rollout_id: str) -> str:
    """A template filled with its calls' stored entries, in call_index order."""
    row = bind.execute(
        sa.select(records.c.generation, records.c.record).where(records.c.rollout_id == rollout_id)
    ).one()
    pieces = bind.execute(
        sa.select(capture_calls.c.record, calls.c.trajectory_entry)
        .select_from(
            calls.join(
                capture_calls,
                (capture_calls.c.rollout_id == calls.c.rollout_id)
                & (capture_calls.c.generation == calls.c.generation)
                & (capture_calls.c.call_index == calls.c.call_index),
            )
        )
        .where(calls.c.rollout_id == rollout_id, calls.c.generation == row.generation)
        .order_by(calls.c.call_index)
    ).all()
    if any(piece.trajectory_entry is None for piece in pieces):
        raise RuntimeError(f"the template of {rollout_id} has a call without a trajectory entry")
    capture_entries = "[" + ",".join(str(piece.record) for piece in pieces) + "]"
    model_calls = "[" + ",".join(str(piece.trajectory_entry) for piece in pieces) + "]"
    text = str(row.record).replace(CALLS_MARKER, capture_entries, 1)
    return text.replace(MODEL_CALLS_MARKER, model_calls, 1)


def downgrade() -> None:
    # Templates become whole records again, so a read at 0004 returns the same bytes.
    bind = op.get_bind()
    for rollout_id in _templates(bind):
        bind.execute(
            records.update()
            .where(records.c.rollout_id == rollout_id)
            .values(record=_whole_record(bind, rollout_id), assembled=False)
        )
    op.drop_table("projection_versions")
    op.drop_column("observation_records", "call_totals")
    op.drop_column("observation_records", "assembled")
    op.drop_column("observation_calls", "trajectory_entry")
