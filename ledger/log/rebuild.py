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
  rebuilt (a view may read its rows), a new build of the views is started beside the live one
  in that same transaction (log/view_builds.py: its empty tables created, its checkpoint at
  seq 0); the views' follower (the projector process, or ``catch_up``) then fills it a page at
  a time, each page a short write transaction the appends take turns with, and swaps it in
  when it reaches the head. Until then the live build answers reads: kept current by the
  follower when its tables have the running code's columns, else as far as it had projected,
  a read of a rollout with later events then waiting and answering 503 (the freshness rule);
  run-level reads say how far the views are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, delete, func, select, text

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
from ledger.log.view_builds import start_build
from ledger.log.view_checkpoints import mark_build_running
from ledger.log.view_failures import clear_failures
from ledger.log.wal_checkpoints import WalCheckpoints
from ledger.log.writer import APPEND_LOCK_KEY, AsyncEngineRunner, BatchRunner, SQLiteRunner
from ledger.log.writer_lock import WriterLock

Progress = Callable[[int], None]


@dataclass
class RebuildReport:
    stale: list[str] = field(default_factory=list)  # empty: every projection was current
    events: int = 0  # replayed through the write side in the transaction (0: it was current)
    seconds: float = 0.0
    # A build of the views was started beside the live one: their follower fills it from seq 0
    # and swaps it in at the head.
    views_reset: bool = False
    # What a caller that followed the views to the head then applied, and how long it took.
    views_events: int = 0
    views_seconds: float = 0.0


def _runner(url: str, *, synchronous: Synchronous, busy_timeout_ms: int) -> BatchRunner:
    if is_sqlite_url(url):
        engine = create_sqlite_writer_engine(
            url, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms
        )
        return SQLiteRunner(engine, WriterLock(sqlite_path(url)), checkpoints=WalCheckpoints())
    return AsyncEngineRunner(create_async_db_engine(url, null_pool=True))


def rebuild_in_transaction(
    conn: Connection,
    catalogue: Catalogue,
    projectors: Sequence[Projector],
    *,
    progress: Progress | None = None,
) -> RebuildReport:
    """Rebuild the write side if one of its projections is stale, and start a build of the views
    for their follower if one of them is or the write side was rebuilt; ``conn`` holds the
    write transaction. The tables computed from the views (``Area.derived_from_views``) stay
    as they are, true of the live build: the follower empties them when it swaps the new one
    in."""
    started = time.perf_counter()
    report = RebuildReport(stale=stale_projections(recorded_versions(conn), projectors))
    if not report.stale:
        return report
    write_side = [p for p in projectors if not p.follows_log]
    views = [p for p in projectors if p.follows_log]
    if any(p.name in report.stale for p in write_side):
        report.events = _replay_write_side(conn, catalogue, write_side, progress)
    if views:
        start_views_build(conn, views)
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


def start_views_build(conn: Connection, views: Sequence[Projector]) -> None:
    """Start a build of ``views`` (their stable tables: built with no build) beside the live
    one, which the views' follower fills from seq 0 and swaps in at the head. Until then the
    live views' checkpoints say that a build runs and the head it must reach
    (``rebuild_until``: ``/readyz``, ``projection_status``)."""
    names = [view.name for view in views]
    head = int(conn.execute(select(func.max(events.c.seq))).scalar() or 0)
    tables = [table for view in views for table in view.tables]
    start_build(conn, tables, {view.name: view.version for view in views}, head)
    mark_build_running(conn, names, head)
    clear_failures(conn, names)


async def rebuild_stale_projections(
    url: str,
    catalogue: Catalogue,
    projectors: Sequence[Projector],
    *,
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
            return rebuild_in_transaction(conn, catalogue, projectors, progress=progress)

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
