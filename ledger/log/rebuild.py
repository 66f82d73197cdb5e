"""Stale projections after an upgrade (``ledger db upgrade``): the write side rebuilt in place,
the views started again from seq 0 for the projector to rebuild while appends go on.

A projection is stale when the rows in its tables were not written by the running code's
version of it (log/projection_versions.py): a revision marked it, its code raised its version,
or it is new to this database.

- **The write side** (``follows_log`` false: what commands decide against) must be complete
  before the next append is decided. When one of its projections is stale, all of them are
  rebuilt: verify's replay (log/replay.py) of the whole log through them, on the live tables,
  in ONE write transaction that holds the writer's lock (``BEGIN IMMEDIATE`` and the writer
  flock on SQLite, the append advisory lock on PostgreSQL), so no append interleaves and a
  failure leaves the old rows and marks in place. Appends wait for it.
- **The views** (``follows_log``) no command reads. When one is stale, or the write side was
  rebuilt (a view may read its rows), every view is emptied and its checkpoint set to seq 0 in
  that same transaction, a delete of their rows; the views' follower (the projector process,
  or ``catch_up``) then applies the log again a page at a time, each page a short write
  transaction the appends take turns with. Until it reaches a rollout's last event, a read of
  that rollout waits and then answers 503 (the freshness rule), and run-level reads say how far
  the views are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, Table, delete, func, select, text

from ledger.log.engines import (
    Synchronous,
    create_async_db_engine,
    create_sqlite_writer_engine,
    is_sqlite_url,
    sqlite_path,
)
from ledger.log.errors import ProjectionsStale
from ledger.log.events import Catalogue
from ledger.log.projection_versions import record_versions, recorded_versions, stale_projections
from ledger.log.projector import Projector
from ledger.log.replay import Replay, pages_of
from ledger.log.tables import events
from ledger.log.verify import ChecksAtEnd
from ledger.log.view_checkpoints import start_rebuild
from ledger.log.view_failures import clear_failures
from ledger.log.writer import APPEND_LOCK_KEY, AsyncEngineRunner, BatchRunner, SQLiteRunner
from ledger.log.writer_lock import WriterLock

Progress = Callable[[int], None]


@dataclass
class RebuildReport:
    stale: list[str] = field(default_factory=list)  # empty: every projection was current
    events: int = 0  # replayed through the write side in the transaction (0: it was current)
    seconds: float = 0.0
    # The views were emptied and start again from seq 0: their follower rebuilds them.
    views_reset: bool = False
    # What a caller that followed the views to the head then applied, and how long it took.
    views_events: int = 0
    views_seconds: float = 0.0


def _runner(url: str, *, synchronous: Synchronous, busy_timeout_ms: int) -> BatchRunner:
    if is_sqlite_url(url):
        engine = create_sqlite_writer_engine(
            url, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms
        )
        return SQLiteRunner(engine, WriterLock(sqlite_path(url)))
    return AsyncEngineRunner(create_async_db_engine(url, null_pool=True))


def rebuild_in_transaction(
    conn: Connection,
    catalogue: Catalogue,
    projectors: Sequence[Projector],
    *,
    derived: Sequence[Table] = (),
    progress: Progress | None = None,
) -> RebuildReport:
    """Rebuild the write side if one of its projections is stale, and empty the views for
    their follower if one of them is or the write side was rebuilt, with the ``derived``
    tables computed from them (``Area.derived_from_views``); ``conn`` holds the write
    transaction."""
    started = time.perf_counter()
    report = RebuildReport(stale=stale_projections(recorded_versions(conn), projectors))
    if not report.stale:
        return report
    write_side = [p for p in projectors if not p.follows_log]
    views = [p for p in projectors if p.follows_log]
    if any(p.name in report.stale for p in write_side):
        report.events = _replay_write_side(conn, catalogue, write_side, progress)
    if views:
        reset_views(conn, views, derived)
        report.views_reset = True
    report.seconds = time.perf_counter() - started
    return report


def _replay_write_side(
    conn: Connection,
    catalogue: Catalogue,
    write_side: Sequence[Projector],
    progress: Progress | None,
) -> int:
    # Later projections' tables first (an area's tables may be read by the ones after it).
    for projector in reversed(write_side):
        for table in reversed(projector.tables):
            conn.execute(delete(table))
    checks_at_end = [p for p in write_side if isinstance(p, ChecksAtEnd)]
    for projector in checks_at_end:
        projector.defer_checks()
    replay = Replay(conn, catalogue, write_side)
    for rows in pages_of(conn):
        replay.apply_page(rows)
        if progress is not None:
            progress(len(rows))
    for projector in checks_at_end:
        projector.check_at_end(conn)
    record_versions(conn, write_side)
    return replay.events


def reset_views(
    conn: Connection, views: Sequence[Projector], derived: Sequence[Table] = ()
) -> None:
    """Empty the views and set their checkpoints to seq 0, recorded as the running code's:
    their follower builds them again from the first event. The ``derived`` tables are emptied
    too: computed from the old rows, they would pass for current (a health row is current
    when its record's ``last_seq`` matches, which a rebuild gives back unchanged)."""
    names = [view.name for view in views]
    for table in derived:
        conn.execute(delete(table))
    for view in reversed(views):
        for table in reversed(view.tables):
            conn.execute(delete(table))
    head = conn.execute(select(func.max(events.c.seq))).scalar()
    start_rebuild(conn, names, int(head or 0))
    clear_failures(conn, names)
    record_versions(conn, views)


async def rebuild_stale_projections(
    url: str,
    catalogue: Catalogue,
    projectors: Sequence[Projector],
    *,
    derived: Sequence[Table] = (),
    synchronous: Synchronous = "FULL",
    busy_timeout_ms: int = 30_000,
    progress: Progress | None = None,
) -> RebuildReport:
    """Rebuild the projections from the log if any is stale (``projectors`` are fresh ones,
    not a running store's: they keep state while they apply)."""
    runner = _runner(url, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms)

    def run(conn: Connection) -> RebuildReport:
        with conn.begin():
            if not is_sqlite_url(url):
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": APPEND_LOCK_KEY})
            return rebuild_in_transaction(
                conn, catalogue, projectors, derived=derived, progress=progress
            )

    try:
        return await runner.run(run)
    finally:
        await runner.close()


def stale_error(stale: Sequence[str]) -> ProjectionsStale:
    return ProjectionsStale(
        f"projections not built by this version of the ledger: {', '.join(stale)}; "
        "run `ledger db upgrade` to rebuild them from the log"
    )


async def ensure_projections_current(url: str, projectors: Sequence[Projector]) -> None:
    """Raise ``ProjectionsStale`` unless every projection's rows are its code's."""
    engine = create_async_db_engine(url, read_only=True, null_pool=True)
    try:
        async with engine.connect() as conn:
            stale = stale_projections(await conn.run_sync(recorded_versions), projectors)
    finally:
        await engine.dispose()
    if stale:
        raise stale_error(stale)
