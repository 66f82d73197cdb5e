"""Labelling inside a write command: the capture, observations and result commands call these
in their own transaction, so a rollout's label and the evidence that named it commit together.

A generation is labelled once. The same label again appends nothing; a different one is
refused with 409 before anything is appended (docs/decisions.md, "Run labels"): a rollout id
that arrives under a second run is almost always an id reused by another run without a delete,
and moving the rollout, evidence and all, into the second run's answers would be silent.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, select

from ledger.areas.runs.events import ROLLOUT_LABELLED, RolloutLabelled
from ledger.areas.runs.tables import run_labels
from ledger.log.errors import Conflict
from ledger.log.records import NewEvent
from ledger.log.transaction import WriteTransaction

_SELECT_LABEL = select(run_labels.c.run_label).where(
    run_labels.c.rollout_id == bindparam("b_rollout_id"),
    run_labels.c.generation == bindparam("b_generation"),
)


class RunLabelConflict(Conflict):
    def __init__(self, rollout_id: str, held: str, asked: str) -> None:
        super().__init__(
            f"rollout {rollout_id!r} belongs to run {held!r}, not {asked!r}: a rollout "
            "generation has one run label (delete the rollout before reusing its id)"
        )


@dataclass
class LabelCheck:
    """What the rollout's current generation holds, read once per command and rollout."""

    rollout_id: str
    asked: str
    held: str | None

    def refuse_if_different(self) -> None:
        if self.held is not None and self.held != self.asked:
            raise RunLabelConflict(self.rollout_id, self.held, self.asked)


def check_label(tx: WriteTransaction, rollout_id: str, run: str) -> LabelCheck:
    """Read the generation's label (raises nothing: see ``LabelCheck.refuse_if_different``)."""
    generation = tx.generation_of(rollout_id)
    held = tx.conn.execute(
        _SELECT_LABEL, {"b_rollout_id": rollout_id, "b_generation": generation}
    ).scalar_one_or_none()
    return LabelCheck(rollout_id, run, held)


def label_event(check: LabelCheck) -> NewEvent | None:
    """The ``rollout.labelled`` event to append, unless the generation already holds the
    label (then None); the check then holds it."""
    check.refuse_if_different()
    if check.held is not None:
        return None
    check.held = check.asked
    return NewEvent(ROLLOUT_LABELLED, RolloutLabelled(run=check.asked), rollout_id=check.rollout_id)


def apply_label(tx: WriteTransaction, check: LabelCheck) -> int | None:
    """Append ``rollout.labelled`` unless the generation already holds the label; the seq."""
    event = label_event(check)
    if event is None:
        return None
    return tx.append_many([event])[0].event.seq
