"""What the ledger names about a call's evidence (pure: the clock and the window are inputs).

A call is *admitted* once the ledger holds its lineage row (committed or failure) or its
intent. An admitted call without a capture is ``model_call_capture_pending`` while its rollout
is live and the grace window since it was admitted has not run out (the capture line is written
after the response, and a follower ingests it a moment later), and
``model_call_capture_missing`` after that, or as soon as the rollout is retired. A capture
without a lineage row, on a rollout that has lineage rows, is
``model_call_lineage_row_missing`` (Gym commits the row before it sends the body, so the row
always comes first). ``pending`` is Gym's gap code (contract §5.3); the other two are the
ledger's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

CAPTURE_PENDING = "model_call_capture_pending"
CAPTURE_MISSING = "model_call_capture_missing"
LINEAGE_ROW_MISSING = "model_call_lineage_row_missing"
FINDING_KINDS = (CAPTURE_PENDING, CAPTURE_MISSING, LINEAGE_ROW_MISSING)


@dataclass(frozen=True)
class CallEvidence:
    model_call_id: str
    row_seq: int | None
    row_kind: str | None
    intent_seq: int | None
    capture_seq: int | None
    admitted_at: datetime | None

    @property
    def admitted(self) -> bool:
        return self.row_seq is not None or self.intent_seq is not None

    @property
    def first_seq(self) -> int:
        return min(s for s in (self.row_seq, self.intent_seq, self.capture_seq) if s is not None)


@dataclass(frozen=True)
class Window:
    """The clock a read names pending calls against."""

    now: datetime
    grace_s: float

    @property
    def cutoff(self) -> datetime:
        """A call admitted after this is still within its grace window."""
        return self.now - timedelta(seconds=self.grace_s)


def finding_of(
    call: CallEvidence, *, live: bool, rollout_has_rows: bool, window: Window
) -> str | None:
    if call.admitted and call.capture_seq is None:
        in_grace = call.admitted_at is not None and call.admitted_at > window.cutoff
        return CAPTURE_PENDING if live and in_grace else CAPTURE_MISSING
    if call.capture_seq is not None and call.row_seq is None and rollout_has_rows:
        return LINEAGE_ROW_MISSING
    return None


@dataclass
class Coverage:
    """Calls of a set of rollouts: admitted (a row or an intent), of those captured, missing
    and pending, and captures without a lineage row (on rollouts that have rows)."""

    rollouts: int = 0
    admitted: int = 0
    captured: int = 0
    missing: int = 0
    pending: int = 0
    captures_without_row: int = 0

    def add(self, other: Coverage) -> None:
        self.rollouts += other.rollouts
        self.admitted += other.admitted
        self.captured += other.captured
        self.missing += other.missing
        self.pending += other.pending
        self.captures_without_row += other.captures_without_row

    def public(self) -> dict[str, int]:
        return {
            "rollouts": self.rollouts,
            "admitted": self.admitted,
            "captured": self.captured,
            "missing": self.missing,
            "pending": self.pending,
            "captures_without_row": self.captures_without_row,
        }

    def by_kind(self) -> dict[str, int]:
        return {
            CAPTURE_PENDING: self.pending,
            CAPTURE_MISSING: self.missing,
            LINEAGE_ROW_MISSING: self.captures_without_row,
        }
