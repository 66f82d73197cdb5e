"""The runs area's projection: each labelled rollout's run, for its current generation."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, String, Table

from ledger.areas.runs.labels import MAX_RUN_LABEL_LENGTH
from ledger.log.metadata import metadata

run_labels = Table(
    "run_labels",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("run_label", String(MAX_RUN_LABEL_LENGTH), nullable=False),
    # The ``rollout.labelled`` event.
    Column("labelled_seq", BigInteger, nullable=False),
)
# A selection by run seeks its rollouts.
Index("ix_run_labels_run_label", run_labels.c.run_label, run_labels.c.rollout_id)

__all__ = ["metadata", "run_labels"]
