"""The evidence service: intents as commands; one rollout's reconciliation and a selection's
coverage as reads, against the clock and the grace window."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from sqlalchemy import Connection, select

from ledger.areas.evidence import queries
from ledger.areas.evidence.events import MODEL_CALL_INTENT_RECORDED, ModelCallIntentRecorded
from ledger.areas.evidence.findings import FINDING_KINDS, Coverage, Window, finding_of
from ledger.areas.evidence.tables import evidence_calls as ce
from ledger.areas.health.selection import Selection
from ledger.areas.health.service import SyncRead
from ledger.gym.ids import validate_rollout_id
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction

# The default grace window (``LEDGER_CAPTURE_GRACE_S``): a capture line is written after the
# response body, and a follower ingests it within about a second.
DEFAULT_GRACE_S = 5.0
MAX_INTENTS = 1000


@dataclass(frozen=True)
class IntentReceipt:
    rollout_id: str
    recorded: list[str]  # appended now, in the order given
    already_recorded: list[str]
    seqs: list[int]


def has_intent(tx: WriteTransaction, rollout_id: str, model_call_id: str) -> bool:
    row = tx.conn.execute(
        select(ce.c.intent_seq).where(
            ce.c.rollout_id == rollout_id,
            ce.c.generation == tx.generation_of(rollout_id),
            ce.c.model_call_id == model_call_id,
        )
    ).first()
    return row is not None and row.intent_seq is not None


def record_intents_in(
    tx: WriteTransaction, *, rollout_id: str, model_call_ids: Sequence[str]
) -> IntentReceipt:
    """Inside a writer command: one ``model_call.intent_recorded`` per id the rollout's current
    generation has no intent for yet (repeats, in the list or in the log, append nothing)."""
    recorded: list[str] = []
    already: list[str] = []
    seqs: list[int] = []
    for model_call_id in model_call_ids:
        if model_call_id in recorded or has_intent(tx, rollout_id, model_call_id):
            already.append(model_call_id)
            continue
        appended = tx.append(
            MODEL_CALL_INTENT_RECORDED,
            ModelCallIntentRecorded(model_call_id=model_call_id),
            rollout_id=rollout_id,
        )
        recorded.append(model_call_id)
        seqs.append(appended.event.seq)
    return IntentReceipt(rollout_id, recorded, already, seqs)


def evidence_document(evidence: queries.RolloutEvidence, window: Window) -> dict[str, Any]:
    """``{"rollout_id", "generation", "state", "calls": [...], "findings": {kind: [ids]},
    "coverage": {...}}``: each call with the seq of its row, intent and capture (null: none)."""
    has_rows = evidence.has_rows
    calls = []
    findings: dict[str, list[str]] = {kind: [] for kind in FINDING_KINDS}
    coverage = Coverage(rollouts=1)
    for call in evidence.calls:
        finding = finding_of(call, live=evidence.live, rollout_has_rows=has_rows, window=window)
        if finding is not None:
            findings[finding].append(call.model_call_id)
        calls.append(
            {
                "model_call_id": call.model_call_id,
                "row_seq": call.row_seq,
                "row_kind": call.row_kind,
                "intent_seq": call.intent_seq,
                "capture_seq": call.capture_seq,
                "admitted_at": None if call.admitted_at is None else call.admitted_at.isoformat(),
                "finding": finding,
            }
        )
        if call.admitted:
            coverage.admitted += 1
            coverage.captured += call.capture_seq is not None
    coverage.pending = len(findings[FINDING_KINDS[0]])
    coverage.missing = len(findings[FINDING_KINDS[1]])
    coverage.captures_without_row = len(findings[FINDING_KINDS[2]])
    return {
        "rollout_id": evidence.rollout_id,
        "generation": evidence.generation,
        "state": "live" if evidence.live else "retired",
        "grace_s": window.grace_s,
        "coverage": coverage.public(),
        "findings": {kind: ids for kind, ids in findings.items() if ids},
        "calls": calls,
    }


def coverage_document(figures: Sequence[queries.RolloutFigures]) -> dict[str, Any]:
    """The selection's totals and the same per run label (``null``: unlabelled rollouts)."""
    total = Coverage()
    by_run: dict[str | None, Coverage] = {}
    for figure in figures:
        total.add(figure.coverage)
        by_run.setdefault(figure.run_label, Coverage()).add(figure.coverage)
    return {
        **total.public(),
        "runs": [
            {"run": run, **coverage.public()}
            for run, coverage in sorted(
                by_run.items(), key=lambda item: (item[0] is not None, item[0] or "")
            )
        ],
    }


class EvidenceService:
    """Reads against the clock; ``read_sync`` is a store's or a reader's (``ledger health``)."""

    def __init__(
        self,
        read_sync: SyncRead,
        grace_s: float = DEFAULT_GRACE_S,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._read_sync = read_sync
        self.grace_s = grace_s
        self._clock = clock or (lambda: datetime.now(UTC))

    def window(self) -> Window:
        return Window(self._clock(), self.grace_s)

    async def rollout(self, rollout_id: str) -> dict[str, Any] | None:
        """The rollout's reconciliation; None when the ledger has no such rollout."""
        validate_rollout_id(rollout_id)
        evidence = await self._read_sync(partial(queries.rollout_evidence, rollout_id=rollout_id))
        return None if evidence is None else evidence_document(evidence, self.window())

    async def coverage(self, selection: Selection | None = None) -> dict[str, Any]:
        window = self.window()
        figures = await self._read_sync(
            partial(queries.rollout_figures, window=window, selection=selection)
        )
        return {"grace_s": window.grace_s, **coverage_document(figures)}


async def record_intents(
    store: LedgerStore, rollout_id: str, model_call_ids: Sequence[str]
) -> IntentReceipt:
    validate_rollout_id(rollout_id)
    ids = list(model_call_ids)
    receipt: IntentReceipt = await store.execute(
        lambda tx: record_intents_in(tx, rollout_id=rollout_id, model_call_ids=ids)
    )
    return receipt


def coverage_now(conn: Connection, window: Window, selection: Selection | None) -> dict[str, Any]:
    """The same as ``EvidenceService.coverage`` inside a read the caller already holds."""
    figures = queries.rollout_figures(conn, window, selection)
    return {"grace_s": window.grace_s, **coverage_document(figures)}
