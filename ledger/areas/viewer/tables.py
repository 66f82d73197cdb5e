"""The viewer has no tables of its own; it adds one index to the kernel's ``rollouts`` so the
overview sorted by last event reads a page from an index (revision 0006)."""

from __future__ import annotations

from sqlalchemy import Index

from ledger.log.tables import rollouts

rollouts_by_last_seq = Index("ix_rollouts_last_seq", rollouts.c.last_seq)
