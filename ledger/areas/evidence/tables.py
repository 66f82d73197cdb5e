"""The evidence area's projection: one row per model call id of each rollout's current
generation, with the seq of each kind of evidence the ledger holds for it (NULL: none).

The columns are facts of the log only (seqs and the time the call was first admitted); whether
a call without a capture is pending or missing depends on the clock and the grace window, so
it is decided on read (areas/evidence/findings.py), never stored.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Integer, String, Table

from ledger.log.metadata import metadata

evidence_calls = Table(
    "evidence_calls",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("generation", Integer, primary_key=True),
    Column("model_call_id", String(200), primary_key=True),
    # The first ``ledger.row_recorded`` / ``ledger.failure_recorded`` of the call, and which.
    Column("row_seq", BigInteger, nullable=True),
    Column("row_kind", String(16), nullable=True),
    # The first ``model_call.intent_recorded``.
    Column("intent_seq", BigInteger, nullable=True),
    # The first ``model_call.captured`` since the rollout's last ``capture.cleared``.
    Column("capture_seq", BigInteger, nullable=True),
    # When the ledger recorded the call's first row or intent (the grace window starts here);
    # NULL for a call known from its capture only.
    Column("admitted_at", DateTime(timezone=True), nullable=True),
)

__all__ = ["evidence_calls", "metadata"]
