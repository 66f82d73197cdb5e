"""Rebuilding stale projections from the log, in place (``ledger db upgrade``).

A projection is stale when the rows in its tables were not written by the running code's
version of it (log/projection_versions.py): a revision marked it, its code raised its version,
or it is new to this database. Then every projection is rebuilt, not only the stale ones: a
projector may read the tables of those before it while it applies an event (the observations
records read ``rollouts`` and ``capture_state``) and must see them as they were at that event,
and one after it may have derived its rows from the stale rows. The rebuild is verify's replay
(log/replay.py) run on the live tables in ONE write transaction: it takes the writer's lock
(``BEGIN IMMEDIATE`` and the writer flock on SQLite, the append advisory lock on PostgreSQL),
so no append interleaves, and a failure leaves the old rows and the old marks in place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import Connection, delete, text, update

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
from ledger.log.verify import ChecksAtEnd
from ledger.log.view_checkpoints import view_checkpoints
from ledger.log.writer import APPEND_LOCK_KEY, AsyncEngineRunner, BatchRunner, SQLiteRunner
from ledger.log.writer_lock import WriterLock

Progress = Callable[[int], None]


@dataclass
class RebuildReport:
    stale: list[str] = field(default_factory=list)  # empty: every projection was current
    events: int = 0
    seconds: float = 0.0


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
    progress: Progress | None = None,
) -> RebuildReport:
    """Rebuild every projection if any is stale; ``conn`` holds the write transaction."""
    started = time.perf_counter()
    report = RebuildReport(stale=stale_projections(recorded_versions(conn), projectors))
    if not report.stale:
        return report
    # Later projections' tables first (an area's tables may be read by the ones after it).
    for projector in reversed(projectors):
        for table in reversed(projector.tables):
            conn.execute(delete(table))
    checks_at_end = [p for p in projectors if isinstance(p, ChecksAtEnd)]
    for projector in checks_at_end:
        projector.defer_checks()
    replay = Replay(conn, catalogue, projectors)
    for rows in pages_of(conn):
        replay.apply_page(rows)
        if progress is not None:
            progress(len(rows))
    for projector in checks_at_end:
        projector.check_at_end(conn)
    record_versions(conn, projectors)
    # Every view now holds the whole log: its checkpoint says so (view_checkpoints.py).
    conn.execute(update(view_checkpoints).values(seq=replay.last_seq, updated_at=datetime.now(UTC)))
    report.events = replay.events
    report.seconds = time.perf_counter() - started
    return report


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
