"""``ledger compact``: redact the payloads of events of deleted generations.

The one change the events table's triggers allow (docs/architecture.md, "Immutability"): the
``payload`` of an event whose generation has ended (the rollout's current generation is higher)
becomes NULL, nothing else changes. ``payload_sha256`` and ``hash`` stay, so the chain still
verifies; every projection drops an ended generation's rows at its tombstone, so a rebuild from
the redacted log gives the same tables (the projectors accept ``payload is None``).

Each page of redactions is one write command with its own ``ledger.compacted`` event, in the
same transaction: whatever moment the process stops, every redaction is recorded by an event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, Integer, bindparam, cast, func, select, update
from sqlalchemy.types import LargeBinary

from ledger.log.engines import secure_delete
from ledger.log.events import EventType
from ledger.log.store import LedgerStore
from ledger.log.tables import events, rollouts
from ledger.log.transaction import WriteTransaction

LEDGER_COMPACTED = "ledger.compacted"
PAGE_EVENTS = 1000
PAGE_BYTES = 16 * 1024 * 1024


class LedgerCompacted(BaseModel):
    """Payloads of ended generations redacted by ``ledger compact`` (the events stay)."""

    model_config = ConfigDict(extra="forbid")
    events: int
    payload_bytes: int
    first_seq: int
    last_seq: int
    rollouts: int


EVENT_TYPES = [EventType(LEDGER_COMPACTED, LedgerCompacted)]


@dataclass(frozen=True)
class Candidate:
    seq: int
    kind: str
    rollout_id: str
    payload_bytes: int


@dataclass
class CompactionReport:
    events: int = 0
    payload_bytes: int = 0
    rollouts: set[str] = field(default_factory=set)
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Seqs of the ``ledger.compacted`` events written (none in a dry run).
    recorded: list[int] = field(default_factory=list)

    def add(self, page: Sequence[Candidate]) -> None:
        for candidate in page:
            self.events += 1
            self.payload_bytes += candidate.payload_bytes
            self.rollouts.add(candidate.rollout_id)
            count, size = self.by_kind.get(candidate.kind, (0, 0))
            self.by_kind[candidate.kind] = (count + 1, size + candidate.payload_bytes)


def _payload_bytes(dialect: str) -> object:
    if dialect == "postgresql":
        return func.octet_length(events.c.payload)
    # SQLite's length() of TEXT counts characters; of a BLOB, bytes.
    return func.length(cast(events.c.payload, LargeBinary))


def candidates(
    conn: Connection, *, after: int, limit: int = PAGE_EVENTS, max_bytes: int = PAGE_BYTES
) -> list[Candidate]:
    """The next events (seq > ``after``) of ended generations that still have a payload."""
    size = cast(_payload_bytes(conn.dialect.name), Integer).label("size")
    query = (
        select(events.c.seq, events.c.kind, events.c.rollout_id, size)
        .join(rollouts, rollouts.c.rollout_id == events.c.rollout_id)
        .where(
            events.c.seq > after,
            events.c.payload.is_not(None),
            rollouts.c.generation > events.c.generation,
        )
        .order_by(events.c.seq)
        .limit(limit)
    )
    page: list[Candidate] = []
    total = 0
    for row in conn.execute(query):
        page.append(Candidate(row.seq, row.kind, row.rollout_id, int(row.size or 0)))
        total += int(row.size or 0)
        if total >= max_bytes:
            break
    return page


_REDACT = (
    update(events)
    .where(events.c.seq == bindparam("b_seq"), events.c.payload.is_not(None))
    .values(payload=None)
)


def redact_page(tx: WriteTransaction, *, after: int) -> tuple[list[Candidate], int | None]:
    """One write command: redact the next page and record it in a ``ledger.compacted`` event;
    returns the page and that event's seq ([] and None when nothing is left)."""
    page = candidates(tx.conn, after=after)
    if not page:
        return [], None
    with secure_delete(tx.conn):
        tx.conn.execute(_REDACT, [{"b_seq": candidate.seq} for candidate in page])
    appended = tx.append(
        LEDGER_COMPACTED,
        LedgerCompacted(
            events=len(page),
            payload_bytes=sum(candidate.payload_bytes for candidate in page),
            first_seq=page[0].seq,
            last_seq=page[-1].seq,
            rollouts=len({candidate.rollout_id for candidate in page}),
        ),
    )
    return page, appended.event.seq


async def compact(store: LedgerStore, *, dry_run: bool = False) -> CompactionReport:
    """Redact every payload of an ended generation (``dry_run``: only count them), a page per
    command; each read or write is its own short transaction."""
    report = CompactionReport()
    after = 0
    while True:
        if dry_run:
            async with store.read() as conn:
                page = await conn.run_sync(partial(candidates, after=after))
        else:
            page, recorded = await store.execute(partial(redact_page, after=after))
            if recorded is not None:
                report.recorded.append(recorded)
        if not page:
            return report
        report.add(page)
        after = page[-1].seq
