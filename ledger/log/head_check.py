"""The log against what it is known to have been: signed checkpoints, its own chain's tail, and
the fences its events set.

Each check is a synchronous read of one connection and returns FAIL lines (texts naming what is
wrong and where), never raises for a damaged log: ``ledger verify``, ``ledger db check`` and the
start of ``ledger serve`` print them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Connection, and_, select

from ledger.log.checkpoints import Checkpoint, key_id
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.log.rollouts_projection import RETIRED
from ledger.log.tables import events, rollouts
from ledger.log.transaction import read_head
from ledger.log.verify import chain_problem
from ledger.log.witness import WitnessedCheckpoint

_IN_CHUNK = 500
_TAIL_PAGE = 2000
# A damaged store is named by its first problems, not all of them.
MAX_FENCE_PROBLEMS = 10


@dataclass
class HeadReport:
    """``problems``: FAIL lines. ``latest``: the highest checkpoint the log agrees with."""

    compared: int = 0
    problems: list[str] = field(default_factory=list)
    latest: Checkpoint | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _events(first: int, last: int, *, were: bool = False) -> str:
    """``event 7 is`` / ``events 5..7 are`` (``were``: past tense)."""
    if first == last:
        return f"event {first} {'was' if were else 'is'}"
    return f"events {first}..{last} {'were' if were else 'are'}"


def _stored_hashes(conn: Connection, seqs: Sequence[int]) -> dict[int, str]:
    found: dict[int, str] = {}
    for start in range(0, len(seqs), _IN_CHUNK):
        chunk = seqs[start : start + _IN_CHUNK]
        rows = conn.execute(select(events.c.seq, events.c.hash).where(events.c.seq.in_(chunk)))
        found.update({row.seq: row.hash for row in rows})
    return found


def compare_with_checkpoints(
    conn: Connection,
    witnessed: Sequence[WitnessedCheckpoint],
    public_key: Ed25519PublicKey,
) -> HeadReport:
    """Every checkpoint must be signed by ``public_key`` and name an event the log still has,
    with the same chain hash. A log shorter than a checkpoint lost its tail; another hash at a
    checkpoint's seq means the log was rewritten after the last checkpoint that still agrees."""
    report = HeadReport()
    expected_key = key_id(public_key)
    signed: list[WitnessedCheckpoint] = []
    for item in witnessed:
        if item.checkpoint.signed_by(public_key):
            signed.append(item)
        else:
            report.problems.append(
                f"{item.source}: the checkpoint at seq {item.checkpoint.seq} is not signed by "
                f"this ledger's key (key id {item.checkpoint.key_id[:16]}…, expected "
                f"{expected_key[:16]}…): refused"
            )
    if not signed:
        return report
    head = read_head(conn)
    signed.sort(key=lambda item: item.checkpoint.seq)
    stored = _stored_hashes(conn, sorted({item.checkpoint.seq for item in signed}))
    agreed_seq = 0
    for item in signed:
        checkpoint = item.checkpoint
        report.compared += 1
        if checkpoint.seq > head.seq:
            report.problems.append(
                f"{item.source}: the log ends at seq {head.seq} but reached seq "
                f"{checkpoint.seq} (hash {checkpoint.hash[:16]}…, published "
                f"{checkpoint.published_at}): {_events(head.seq + 1, checkpoint.seq)} missing "
                "(lost tail)"
            )
        elif stored.get(checkpoint.seq) != checkpoint.hash:
            found = stored.get(checkpoint.seq)
            what = "has no event" if found is None else f"has hash {found[:16]}…"
            report.problems.append(
                f"{item.source}: at seq {checkpoint.seq} the log {what} where the checkpoint "
                f"published {checkpoint.published_at} says {checkpoint.hash[:16]}…: "
                f"{_events(agreed_seq + 1, checkpoint.seq, were=True)} rewritten or removed"
            )
        else:
            agreed_seq = checkpoint.seq
            report.latest = checkpoint
    return report


def verify_tail(conn: Connection, checkpoint: Checkpoint | None) -> str | None:
    """The chain from ``checkpoint`` (or from seq 0) to the head, recomputed: what the start
    of ``serve`` checks (the events before the checkpoint were checked when it was signed)."""
    seq, prev_hash = (0, "00" * 32) if checkpoint is None else (checkpoint.seq, checkpoint.hash)
    while True:
        rows = conn.execute(
            select(events).where(events.c.seq > seq).order_by(events.c.seq).limit(_TAIL_PAGE)
        ).all()
        if not rows:
            return None
        for row in rows:
            problem = chain_problem(row, seq + 1, prev_hash)
            if problem is not None:
                return f"hash chain at seq {row.seq}: {problem}"
            seq, prev_hash = row.seq, row.hash


def fence_problems(conn: Connection) -> list[str]:
    """Fences and generations the events set but the ``rollouts`` rows do not show (a row
    changed by hand would let a retired rollout take writes again). Read through the events'
    ``(kind, seq)`` index: the cost follows the retire and delete events, not the log."""
    problems: list[str] = []
    reopened = conn.execute(
        select(events.c.rollout_id, events.c.generation, events.c.seq, rollouts.c.state)
        .join(
            rollouts,
            and_(
                rollouts.c.rollout_id == events.c.rollout_id,
                rollouts.c.generation == events.c.generation,
            ),
        )
        .where(events.c.kind == ROLLOUT_RETIRED, rollouts.c.state != RETIRED)
        .order_by(events.c.seq)
        .limit(MAX_FENCE_PROBLEMS)
    )
    problems.extend(
        f"rollout {row.rollout_id!r} was retired at seq {row.seq} (generation "
        f"{row.generation}) but its row reads {row.state!r}: the fence was undone outside "
        "the ledger"
        for row in reopened
    )
    revived = conn.execute(
        select(events.c.rollout_id, events.c.generation, events.c.seq)
        .join(rollouts, rollouts.c.rollout_id == events.c.rollout_id)
        .where(events.c.kind == ROLLOUT_DELETED, rollouts.c.generation <= events.c.generation)
        .order_by(events.c.seq)
        .limit(MAX_FENCE_PROBLEMS)
    )
    problems.extend(
        f"rollout {row.rollout_id!r}: generation {row.generation} was deleted at seq "
        f"{row.seq} but its row still reads that generation: it was changed outside the ledger"
        for row in revived
    )
    return problems
