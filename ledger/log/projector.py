"""The projector contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from sqlalchemy import Connection, Table

from ledger.log.records import StoredEvent


class Projector(Protocol):
    """Maintains some tables from events. ``apply`` runs inside the append transaction.

    It must be deterministic (no clocks, no randomness beyond the event itself), because
    ``ledger verify`` rebuilds every projection from seq 0 and expects identical rows. It must
    also accept a redacted event (``payload is None``, after compaction of a deleted generation).

    ``version`` names the rows the code writes: raise it whenever a change would make them
    differ from what the projector wrote before (a new column's values, another derivation).
    ``ledger db upgrade`` then rebuilds the projection from the log (log/projection_versions.py,
    log/rebuild.py); no migration needs the projection's code for that.
    """

    name: str
    version: int
    tables: tuple[Table, ...]

    def handles(self, kind: str) -> bool: ...

    def apply(self, conn: Connection, event: StoredEvent) -> None: ...

    def flush(self, conn: Connection) -> None:
        """Finish work deferred by ``apply``; the writer calls it when a command has appended all
        its events inside the command's savepoint (``verify`` calls it after each page of the log).

        A projector whose rows are an expensive function of many events (a rollout's whole
        enriched record) rebuilds them here once per command instead of once per event; one
        whose row is overwritten by every event (a rollout's state) writes it here once. The
        rows must come out the same either way. Projectors that do everything in ``apply``
        do nothing here.
        """
        ...

    def discard(self) -> None:
        """Forget deferred work: the command failed and its savepoint was rolled back."""
        ...


@runtime_checkable
class DefersRows(Protocol):
    """A projector that keeps rows in memory while a command appends (``flush`` writes them).

    Until then its tables are behind the events, so whatever reads them by SQL during the
    command must first have them written: the command calls ``WriteTransaction.flush_pending``,
    which calls ``write_pending`` on every such projector (reading ``tx.conn`` does nothing).
    Writing early changes no row, it only costs the statements that deferring saved.
    """

    def write_pending(self, conn: Connection) -> None:
        """Write the rows kept in memory now (the command goes on appending afterwards)."""
        ...


@runtime_checkable
class AppliesMany(Protocol):
    """A projector that applies a run of events at once (a page of ``ledger verify``'s replay),
    e.g. writing their rows with one ``executemany`` per statement instead of one statement per
    event.

    ``apply_many(conn, events)`` then ``flush`` must leave exactly the rows ``apply`` of each
    event in turn then ``flush`` leaves (tests/log/test_replay.py compares both on a varied
    log). ``events`` are in seq order and all of kinds the projector handles. A replay gives a
    projector its events of a page before the next projector gets its own, which is the
    per-event order as far as any projector can tell: ``apply`` reads and writes only its own
    tables and memory (``flush`` may read the tables of projectors before it, and runs after
    every projector has applied).
    """

    def apply_many(self, conn: Connection, events: Sequence[StoredEvent]) -> None: ...
