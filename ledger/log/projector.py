"""The projector contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from sqlalchemy import Connection, Table

from ledger.log.records import StoredEvent


class Projector(Protocol):
    """Maintains some tables from events.

    It must be deterministic (no clocks, no randomness beyond the event itself), because
    ``ledger verify`` rebuilds every projection from seq 0 and expects identical rows. It must
    also accept a redacted event (``payload is None``, after compaction of a deleted generation).

    Two kinds run it. The write side's projectors (``Area.projectors``) run inside the append:
    when ``apply`` (or ``apply_many``) returns, every row of those events is written, because
    the next decision may read them by SQL; their ``flush`` and ``discard`` do nothing. The
    views (``Area.views``) follow the log a page at a time in their own transaction
    (log/projection_follower.py): they may keep work for ``flush`` at the end of the page, and
    may read the payloads of the events they apply from ``events`` rather than copy them (a
    replay into a scratch file copies each page's seqs and payloads there: log/replay.py).

    ``version`` names the rows the code writes: raise it whenever a change would make them
    differ from what the projector wrote before (a new column's values, another derivation).
    ``ledger db upgrade`` then rebuilds the projection from the log (log/projection_versions.py,
    log/rebuild.py); no migration needs the projection's code for that.
    """

    name: str
    version: int
    tables: tuple[Table, ...]
    # True for a view: it runs behind a ``ProjectionFollower``, never in the append (a store
    # refuses it: a view's rows are written by its ``flush``, which the append never calls).
    follows_log: bool

    def handles(self, kind: str) -> bool: ...

    def apply(self, conn: Connection, event: StoredEvent) -> None: ...

    def flush(self, conn: Connection) -> None:
        """Finish work a view deferred while it applied a page (``Replay`` calls it after each
        page). A view whose rows are an expensive function of many events (a rollout's whole
        enriched record) rebuilds them here once per page instead of once per event. The rows
        must come out the same either way. A write-side projector does nothing here.
        """
        ...

    def discard(self) -> None:
        """Forget deferred work: the page's transaction was rolled back."""
        ...


@runtime_checkable
class AppliesMany(Protocol):
    """A projector that applies a run of events at once (a command's ``append_many``, a page of
    a replay), e.g. writing a rollout's row once for all its events, or their rows with one
    ``executemany`` per statement instead of one statement per event.

    ``apply_many(conn, events)`` (then ``flush``) must leave exactly the rows ``apply`` of each
    event in turn (then ``flush``) leaves (tests/log/test_replay.py compares both on a varied
    log). ``events`` are in seq order and all of kinds the projector handles. Each projector
    gets its events of a run before the next projector gets its own, which is the per-event
    order as far as any projector can tell: ``apply`` reads and writes only its own tables and
    memory (a view's ``flush`` may read the tables of projectors before it, and runs after every
    projector has applied).
    """

    def apply_many(self, conn: Connection, events: Sequence[StoredEvent]) -> None: ...


def apply_events(
    conn: Connection, projectors: Sequence[Projector], events: Sequence[StoredEvent]
) -> None:
    """Each projector's events of ``events`` (the kinds it handles), in projector order: at
    once through ``apply_many`` when it has one, else one ``apply`` each."""
    if not events:
        return
    for projector in projectors:
        mine = [event for event in events if projector.handles(event.kind)]
        if not mine:
            continue
        # Looked up, not ``isinstance(projector, AppliesMany)``: a runtime-checkable
        # protocol's check walks the protocol's members, on every append.
        apply_many = getattr(projector, "apply_many", None)
        if apply_many is not None:
            apply_many(conn, mine)
        else:
            for event in mine:
                projector.apply(conn, event)
