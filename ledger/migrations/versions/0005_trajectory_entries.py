"""Capture-only records kept as templates: each call's ng_trajectory entry derived once
(observation_calls.trajectory_entry), observation_records.assembled and the running
observation_records.call_totals (store/record_pieces.py).

The data steps use the projection's own code (ledger.app.projections), which ships with these
migrations, so what they store is what the projection stores at this revision.

Revision ID: 0005_trajectory_entries
Revises: 0004_observations
Create Date: 2026-11-30
"""

import json
from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from alembic import op

from ledger.areas.observations.capture_only import CaptureOnlyAssembler, trajectory_entry
from ledger.areas.observations.projection import assemble_capture_only
from ledger.areas.observations.queries import (
    count_call_totals,
    load_call_pieces,
    load_inputs,
    read_record_text_sync,
)
from ledger.areas.observations.record_pieces import fill

revision: str = "0005_trajectory_entries"
down_revision: str | None = "0004_observations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Rollouts are read in pages of this many (keyset order), so memory stays flat.
PAGE = 1000

calls = sa.table(
    "observation_calls",
    sa.column("rollout_id", sa.String),
    sa.column("generation", sa.Integer),
    sa.column("call_index", sa.Integer),
    sa.column("call", sa.Text),
    sa.column("trajectory_entry", sa.Text),
)
records = sa.table(
    "observation_records",
    sa.column("rollout_id", sa.String),
    sa.column("generation", sa.Integer),
    sa.column("bundle", sa.Text),
    sa.column("result", sa.Text),
    sa.column("record", sa.Text),
    sa.column("assembled", sa.Boolean),
    sa.column("call_totals", sa.Text),
)


def _pages(bind: sa.Connection, query: sa.Select[tuple[str]]) -> Iterator[str]:
    """The rollout ids the query selects (its one column), read in pages in id order: the
    callers change rows without changing which rows the query selects."""
    column = query.selected_columns[0]
    after: str | None = None
    while True:
        page = query.order_by(column).limit(PAGE)
        if after is not None:
            page = page.where(column > after)
        ids = [str(row[0]) for row in bind.execute(page).all()]
        yield from ids
        if len(ids) < PAGE:
            return
        after = ids[-1]


def upgrade() -> None:
    # Plain ADD COLUMN (no batch table copy on SQLite: the views of 0004 read these tables).
    op.add_column("observation_calls", sa.Column("trajectory_entry", sa.Text(), nullable=True))
    op.add_column(
        "observation_records",
        sa.Column("assembled", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("observation_records", sa.Column("call_totals", sa.Text(), nullable=True))
    bind = op.get_bind()
    # Calls stored before this revision get their entry: the projection derives it for every
    # new call, so a rebuild (`ledger verify`) would otherwise differ from these rows.
    for rollout_id in _pages(bind, sa.select(calls.c.rollout_id).distinct()):
        for row in bind.execute(
            sa.select(calls.c.generation, calls.c.call_index, calls.c.call).where(
                calls.c.rollout_id == rollout_id
            )
        ).all():
            bind.execute(
                calls.update()
                .where(calls.c.rollout_id == rollout_id)
                .where(calls.c.generation == row.generation)
                .where(calls.c.call_index == row.call_index)
                .values(trajectory_entry=trajectory_entry(json.loads(row.call)))
            )
    # Every record gets its calls' running totals, as the projection keeps them.
    for rollout_id in _pages(bind, sa.select(records.c.rollout_id)):
        generation = bind.execute(
            sa.select(records.c.generation).where(records.c.rollout_id == rollout_id)
        ).scalar_one()
        totals = count_call_totals(bind, rollout_id, generation)
        bind.execute(
            records.update()
            .where(records.c.rollout_id == rollout_id)
            .values(call_totals=totals.dump() if totals.count else None)
        )
    # Capture-only records become templates where the template gives the same bytes, as the
    # projection would store them now.
    assembler = CaptureOnlyAssembler()
    capture_only = sa.select(records.c.rollout_id).where(
        records.c.bundle.is_(None), records.c.result.is_(None)
    )
    for rollout_id in _pages(bind, capture_only):
        row = bind.execute(
            sa.select(records.c.generation, records.c.record).where(
                records.c.rollout_id == rollout_id
            )
        ).one()
        inputs = load_inputs(bind, rollout_id, row.generation)
        found = assemble_capture_only(bind, assembler, rollout_id, inputs)
        pieces = load_call_pieces(bind, rollout_id, row.generation)
        if found is not None and fill(found.text, pieces) == row.record:
            bind.execute(
                records.update()
                .where(records.c.rollout_id == rollout_id)
                .values(record=found.text, assembled=True)
            )


def downgrade() -> None:
    # Templates become whole records again, so a read at 0004 returns the same bytes.
    bind = op.get_bind()
    templates = sa.select(records.c.rollout_id).where(records.c.assembled == sa.true())
    for rollout_id in _pages(bind, templates):
        bind.execute(
            records.update()
            .where(records.c.rollout_id == rollout_id)
            .values(record=read_record_text_sync(bind, rollout_id))
        )
    op.drop_column("observation_records", "call_totals")
    op.drop_column("observation_records", "assembled")
    op.drop_column("observation_calls", "trajectory_entry")
