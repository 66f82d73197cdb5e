"""Replaying the log through projectors: what ``ledger verify`` does into a scratch database
and ``ledger db upgrade`` into the live tables of stale projections (log/rebuild.py).

Projectors are flushed once per page, not once per event: by the projector contract a flush
after any run of events gives the same rows, and a projector whose rows are rebuilt from a whole
rollout (the enriched record) would otherwise cost O(calls) per event, O(calls²) per rollout.
A projector with checks worth doing once on the final rows (``ChecksAtEnd``) does them last.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from sqlalchemy import Connection, Row, select

from ledger.log.events import Catalogue
from ledger.log.projector import Projector
from ledger.log.tables import events
from ledger.log.transaction import row_to_event

DEFAULT_PAGE = 2000


@runtime_checkable
class ChecksAtEnd(Protocol):
    """A projector with a check worth doing once on the final rows of a replay rather than on
    every flush (the template check of capture-only records rebuilds the whole record)."""

    def defer_checks(self) -> None:
        """Called before the replay: from now on checks wait for ``check_at_end``."""
        ...

    def check_at_end(self, conn: Connection) -> None:
        """Called after the last event: check the rows the replay left."""
        ...


def event_page_query(after: int, size: int) -> Any:
    return select(events).where(events.c.seq > after).order_by(events.c.seq).limit(size)


def pages_of(conn: Connection, *, page: int = DEFAULT_PAGE) -> Iterator[list[Row[Any]]]:
    """Every event row in seq order, a page at a time, through one synchronous connection."""
    after = 0
    while rows := list(conn.execute(event_page_query(after, page)).all()):
        yield rows
        after = rows[-1].seq


class Replay:
    """Projectors applied to the events of a log, page by page, on ``target``."""

    def __init__(
        self, target: Connection, catalogue: Catalogue, projectors: Sequence[Projector]
    ) -> None:
        self.target = target
        self.catalogue = catalogue
        self.projectors = projectors
        self.last_seq = 0
        self.events = 0
        for projector in projectors:
            if isinstance(projector, ChecksAtEnd):
                projector.defer_checks()

    def apply_page(self, rows: Sequence[Row[Any]]) -> None:
        for row in rows:
            event = row_to_event(row, self.catalogue)
            for projector in self.projectors:
                if projector.handles(event.kind):
                    projector.apply(self.target, event)
            self.last_seq = row.seq
        self.events += len(rows)
        for projector in self.projectors:
            projector.flush(self.target)

    def check_at_end(self) -> None:
        for projector in self.projectors:
            if isinstance(projector, ChecksAtEnd):
                projector.check_at_end(self.target)
