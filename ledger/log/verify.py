"""`ledger verify`: recompute the hash chain, check that each payload is its scheme's bytes, and
rebuild every projection from seq 0 and compare.

A payload is canonical when the scheme that wrote it (log/payload_schemes.py: the standard
library's before revision 0020, orjson's since) writes its parsed value as the same bytes:
the hash chain alone would pass a payload spelled otherwise by whoever wrote it.

Projections are rebuilt into a scratch SQLite file whatever the live backend is, since they are
pure functions of the events; rows are compared as normalised Python values.

The log is read in pages keyed by seq. Given an engine, each page is read in its own short
transaction, so a long verify never pins one read snapshot (which keeps SQLite's WAL from being
checkpointed and PostgreSQL's vacuum from reclaiming rows) while the server writes. Only the end
of the projection check needs one snapshot: the last events and the live tables are read in the
same transaction, so the rebuild and the stored rows describe the same log. Given a connection,
every page is read through it (the caller's snapshot).

The replay (log/replay.py) decodes each event once and applies a page at a time: each
projector gets the page's events of its kinds (``apply_many`` where it has one: one
``executemany`` per statement), then one flush per page, not per event: by the projector
contract a flush after any run of events gives the same rows, and a projector whose rows are
rebuilt from a whole rollout (the enriched record) would otherwise cost O(calls) per event,
O(calls²) per rollout. A projector with work worth doing once on the final rows
(``ChecksAtEnd``: the template checks, and the observations projector's records, each built
once from its final inputs however many pages its rollout spans) does it after the replay,
before the final snapshot, and again in it for what the last events touched. ``ledger db
upgrade`` runs the same replay on the live tables to rebuild stale projections in place
(log/rebuild.py).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from sqlalchemy import Connection, Row, Table, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ledger.log.canonical import NotStorable, parse_json, scheme_bytes, sha256_hex
from ledger.log.chain import GENESIS_HASH, canonical_header, chain_hash
from ledger.log.events import Catalogue
from ledger.log.payload_schemes import SchemeRanges, read_scheme_ranges
from ledger.log.projector import Projector
from ledger.log.records import as_utc
from ledger.log.replay import Replay, scratch_database
from ledger.log.tables import events
from ledger.log.view_builds import read_builds
from ledger.log.view_checkpoints import view_checkpoints

Progress = Callable[[int], None]
# What the log is read from: an engine (a short transaction per page) or a connection.
LogSource = AsyncEngine | AsyncConnection

DEFAULT_PAGE = 2000
_COMPARE_CHUNK = 1000

# Between two looks at views behind the log, while verify waits for a projector.
VIEWS_POLL_S = 0.05


@runtime_checkable
class ChecksAtEnd(Protocol):
    """A projector with a check worth doing once on the final rows of a replay rather than on
    every flush (the template check of capture-only records rebuilds the whole record)."""

    def defer_checks(self) -> None:
        """Called before the replay: from now on checks wait for ``check_at_end``."""
        ...

    def check_at_end(self, conn: Connection) -> None:
        """Called after the last event: check the rows the replay left. It may be called more
        than once (after the pages read without a snapshot, then after the last events): each
        call checks what the flushes since the previous call left."""
        ...


@dataclass
class ChainReport:
    events: int = 0
    first_bad_seq: int | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.first_bad_seq is None


@dataclass
class ProjectionReport:
    differences: list[str] = field(default_factory=list)
    events: int = 0

    @property
    def ok(self) -> bool:
        return not self.differences


@asynccontextmanager
async def _connection(source: LogSource) -> AsyncIterator[AsyncConnection]:
    if isinstance(source, AsyncConnection):
        yield source
        return
    async with source.connect() as conn:
        yield conn


async def _page(conn: AsyncConnection, after: int, size: int) -> list[Row[Any]]:
    query = select(events).where(events.c.seq > after).order_by(events.c.seq).limit(size)
    return list((await conn.execute(query)).all())


async def read_pages(
    source: LogSource, *, page: int = DEFAULT_PAGE
) -> AsyncIterator[list[Row[Any]]]:
    """Every event row in seq order, a page at a time; from an engine, each page in its own
    transaction that ends before the page is handed out."""
    after = 0
    while True:
        async with _connection(source) as conn:
            rows = await _page(conn, after, page)
            if isinstance(source, AsyncEngine):
                await conn.rollback()
        if not rows:
            return
        yield rows
        after = rows[-1].seq


def header_of(row: Row[Any]) -> bytes:
    """The canonical header of a stored event row (what its chain hash covers)."""
    return canonical_header(
        seq=row.seq,
        recorded_at=as_utc(row.recorded_at),
        kind=row.kind,
        schema_version=row.schema_version,
        rollout_id=row.rollout_id,
        generation=row.generation,
        idempotency_key=row.idempotency_key,
    )


def chain_problem(row: Row[Any], expected_seq: int, prev_hash: str) -> str | None:
    if row.seq != expected_seq:
        return f"seq {row.seq} found where {expected_seq} was expected (gap in the log)"
    if row.payload is not None and sha256_hex(row.payload.encode()) != row.payload_sha256:
        return "payload does not match payload_sha256"
    if chain_hash(prev_hash, header_of(row), row.payload_sha256) != row.hash:
        return "hash does not match the chain (header, payload or predecessor changed)"
    return None


def payload_problem(row: Row[Any], schemes: SchemeRanges) -> str | None:
    """Why the stored payload is not the bytes its scheme writes for its value; None if it is
    (or was redacted)."""
    if row.payload is None:
        return None
    scheme = schemes.scheme_of(row.seq)
    try:
        canonical = scheme_bytes(parse_json(row.payload), scheme)
    except NotStorable as exc:
        return f"payload is not storable JSON ({exc})"
    except ValueError as exc:
        return f"payload is not JSON ({str(exc)[:200]})"
    if canonical != row.payload.encode():
        return f"payload is not in its canonical form (scheme {scheme})"
    return None


async def verify_chain(
    source: LogSource, *, progress: Progress | None = None, batch: int = DEFAULT_PAGE
) -> ChainReport:
    report = ChainReport()
    prev_hash = GENESIS_HASH
    async with _connection(source) as conn:
        schemes = await read_scheme_ranges(conn)
        if isinstance(source, AsyncEngine):
            await conn.rollback()
    async for rows in read_pages(source, page=batch):
        for row in rows:
            problem = chain_problem(row, report.events + 1, prev_hash) or payload_problem(
                row, schemes
            )
            if problem is not None:
                report.first_bad_seq = row.seq
                report.problem = problem
                return report
            report.events += 1
            prev_hash = row.hash
        if progress is not None:
            progress(len(rows))
    return report


def _normalise(value: Any) -> Any:
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return parse_json(value)
        except ValueError:
            return value
    return value


def _key(table: Table) -> list[Any]:
    return list(table.primary_key.columns) or list(table.columns)


async def verify_projections(
    source: LogSource,
    catalogue: Catalogue,
    projectors: Sequence[Projector],
    *,
    progress: Progress | None = None,
    batch: int = DEFAULT_PAGE,
    per_event: bool = False,
    views_wait_s: float = 30.0,
) -> ProjectionReport:
    """Rebuild every projection from seq 0 into a scratch SQLite file and compare it with the
    live tables. ``per_event``: replay in the writer's order, one ``apply`` per event and
    projector (the reference the page-at-a-time replay is tested against; slower)."""
    report = ProjectionReport()
    tables = [table for projector in projectors for table in projector.tables]
    checks_at_end = [p for p in projectors if isinstance(p, ChecksAtEnd)]
    for projector in checks_at_end:
        projector.defer_checks()
    with (
        tempfile.TemporaryDirectory(prefix="ledger-verify-") as scratch_dir,
        scratch_database(Path(scratch_dir), tables) as scratch,
        scratch.begin() as scratch_conn,
    ):
        replay = Replay(scratch_conn, catalogue, projectors, per_event=per_event, copy_events=True)
        async for rows in read_pages(source, page=batch):
            replay.apply_page(rows)
            if progress is not None:
                progress(len(rows))
        # The checks at the end rebuild records in full: done here, on the scratch alone, they
        # hold no snapshot of the log. In the final snapshot they run again for what the events
        # appended meanwhile touched only (a projector forgets what it has checked).
        for projector in checks_at_end:
            projector.check_at_end(scratch_conn)
        # The events appended meanwhile and the live tables, in one snapshot.
        # The views follow the log (projection_follower.py): the live tables are compared in a
        # snapshot where they have reached its head. Behind it, another snapshot is taken a
        # moment later, while a projector catches up, up to ``views_wait_s``.
        deadline = time.monotonic() + views_wait_s
        names = [projector.name for projector in projectors]
        while True:
            async with _final_snapshot(source) as conn:
                while rows := await _page(conn, replay.last_seq, batch):
                    replay.apply_page(rows)
                    if progress is not None:
                        progress(len(rows))
                for projector in checks_at_end:
                    projector.check_at_end(scratch_conn)
                behind = await conn.run_sync(views_behind, replay.last_seq, names)
                building = (await conn.run_sync(read_builds)).building if behind else None
                retry = behind and isinstance(source, AsyncEngine)
                if not behind:
                    for table in tables:
                        difference = await _compare(conn, scratch_conn, table)
                        if difference is not None:
                            report.differences.append(difference)
                elif not retry or time.monotonic() >= deadline:
                    why = (
                        "is a projector running? `ledger project` brings them to the head"
                        if building is None
                        else f"an upgrade's build of them is at seq {building.seq}: they are "
                        "compared once it is swapped in"
                    )
                    report.differences.append(f"views: {behind} events behind the log ({why})")
                    retry = False
            if not retry:
                break
            await asyncio.sleep(VIEWS_POLL_S)
        report.events = replay.events
    return report


def views_behind(conn: Connection, head: int, names: Sequence[str]) -> int:
    """How many events of the log up to ``head`` the slowest of the views ``names`` (the
    projections among them that follow the log) has yet to apply."""
    reached = conn.execute(
        select(func.min(view_checkpoints.c.seq)).where(view_checkpoints.c.projection.in_(names))
    ).scalar()
    return 0 if reached is None else max(head - int(reached), 0)


@asynccontextmanager
async def _final_snapshot(source: LogSource) -> AsyncIterator[AsyncConnection]:
    if isinstance(source, AsyncConnection):
        yield source
        return
    options: dict[str, Any] = {}
    if source.dialect.name == "postgresql":
        # READ COMMITTED would give every statement its own snapshot.
        options["isolation_level"] = "REPEATABLE READ"
    async with source.connect() as conn:
        if options:
            conn = await conn.execution_options(**options)
        async with conn.begin():
            yield conn


def _normalised(row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(_normalise(v) for v in row)


def _same(stored: Sequence[Any], rebuilt: Sequence[Any]) -> bool:
    """Raw values first; a column is normalised (JSON text parsed, datetimes in UTC) only when
    its raw values differ: JSON written from a payload's sorted keys and from the dict a
    request arrived as can differ in key order only."""
    if stored == rebuilt:
        return True
    return all(
        a == b or _normalise(a) == _normalise(b) for a, b in zip(stored, rebuilt, strict=True)
    )


async def _compare(conn: AsyncConnection, scratch: Connection, table: Table) -> str | None:
    """Stored and rebuilt rows, both read in key order as they are compared (bounded memory)."""
    query = select(table).order_by(*_key(table))
    live = await conn.stream(query.execution_options(yield_per=_COMPARE_CHUNK))
    # pysqlite cursors fetch lazily: the scratch side is streamed as well.
    rebuilt = (tuple(row) for row in scratch.execute(query))
    stored_count = rebuilt_count = 0
    found: str | None = None
    try:
        # A chunk of stored rows per await: one greenlet switch per chunk, not per row.
        async for chunk in live.partitions():
            for stored_row in chunk:
                stored = tuple(stored_row)
                stored_count += 1
                rebuilt_row = next(rebuilt, None)
                if rebuilt_row is None:
                    continue
                rebuilt_count += 1
                if found is None and not _same(stored, rebuilt_row):
                    found = (
                        f"{table.name}: stored row {_normalised(stored)!r} differs from rebuilt "
                        f"{_normalised(rebuilt_row)!r}"
                    )
    finally:
        await live.close()
    rebuilt_count += sum(1 for _ in rebuilt)
    if stored_count != rebuilt_count:
        return f"{table.name}: {stored_count} rows stored, {rebuilt_count} rebuilt from the log"
    return found
