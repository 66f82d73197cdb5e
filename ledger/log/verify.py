"""`ledger verify`: recompute the hash chain, and rebuild every projection from seq 0 and compare.

Projections are rebuilt into a scratch SQLite file whatever the live backend is, since they are
pure functions of the events; rows are compared as normalised Python values.

The log is read in pages keyed by seq. Given an engine, each page is read in its own short
transaction, so a long verify never pins one read snapshot (which keeps SQLite's WAL from being
checkpointed and PostgreSQL's vacuum from reclaiming rows) while the server writes. Only the end
of the projection check needs one snapshot: the last events and the live tables are read in the
same transaction, so the rebuild and the stored rows describe the same log. Given a connection,
every page is read through it (the caller's snapshot).

The replay itself (flushes per page, checks at the end) is log/replay.py, which
``ledger db upgrade`` also uses to rebuild stale projections in place (log/rebuild.py).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Row, Table, create_engine, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ledger.log.canonical import sha256_hex
from ledger.log.chain import GENESIS_HASH, canonical_header, chain_hash
from ledger.log.events import Catalogue
from ledger.log.metadata import metadata
from ledger.log.projector import Projector
from ledger.log.records import as_utc
from ledger.log.replay import DEFAULT_PAGE, Replay, event_page_query

Progress = Callable[[int], None]
# What the log is read from: an engine (a short transaction per page) or a connection.
LogSource = AsyncEngine | AsyncConnection

_COMPARE_CHUNK = 1000


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
    return list((await conn.execute(event_page_query(after, size))).all())


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


def _chain_problem(row: Row[Any], expected_seq: int, prev_hash: str) -> str | None:
    if row.seq != expected_seq:
        return f"seq {row.seq} found where {expected_seq} was expected (gap in the log)"
    if row.payload is not None and sha256_hex(row.payload.encode()) != row.payload_sha256:
        return "payload does not match payload_sha256"
    header = canonical_header(
        seq=row.seq,
        recorded_at=as_utc(row.recorded_at),
        kind=row.kind,
        schema_version=row.schema_version,
        rollout_id=row.rollout_id,
        generation=row.generation,
        idempotency_key=row.idempotency_key,
    )
    if chain_hash(prev_hash, header, row.payload_sha256) != row.hash:
        return "hash does not match the chain (header, payload or predecessor changed)"
    return None


async def verify_chain(
    source: LogSource, *, progress: Progress | None = None, batch: int = DEFAULT_PAGE
) -> ChainReport:
    report = ChainReport()
    prev_hash = GENESIS_HASH
    async for rows in read_pages(source, page=batch):
        for row in rows:
            problem = _chain_problem(row, report.events + 1, prev_hash)
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
            return json.loads(value)
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
) -> ProjectionReport:
    report = ProjectionReport()
    tables = [table for projector in projectors for table in projector.tables]
    with tempfile.TemporaryDirectory(prefix="ledger-verify-") as scratch_dir:
        scratch = create_engine(f"sqlite+pysqlite:///{Path(scratch_dir) / 'scratch.db'}")
        try:
            metadata.create_all(scratch, tables=tables)
            with scratch.begin() as scratch_conn:
                rebuild = Replay(scratch_conn, catalogue, projectors)
                async for rows in read_pages(source, page=batch):
                    rebuild.apply_page(rows)
                    if progress is not None:
                        progress(len(rows))
                # The events appended meanwhile and the live tables, in one snapshot.
                async with _final_snapshot(source) as conn:
                    while rows := await _page(conn, rebuild.last_seq, batch):
                        rebuild.apply_page(rows)
                        if progress is not None:
                            progress(len(rows))
                    rebuild.check_at_end()
                    for table in tables:
                        difference = await _compare(conn, scratch_conn, table)
                        if difference is not None:
                            report.differences.append(difference)
                report.events = rebuild.events
        finally:
            scratch.dispose()
    return report


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


async def _compare(conn: AsyncConnection, scratch: Connection, table: Table) -> str | None:
    """Stored and rebuilt rows, both read in key order as they are compared (bounded memory)."""
    query = select(table).order_by(*_key(table))
    live = await conn.stream(query.execution_options(yield_per=_COMPARE_CHUNK))
    # pysqlite cursors fetch lazily: the scratch side is streamed as well.
    rebuilt = (tuple(row) for row in scratch.execute(query))
    stored_count = rebuilt_count = 0
    found: str | None = None
    try:
        async for stored in live:
            stored_count += 1
            rebuilt_row = next(rebuilt, None)
            if rebuilt_row is None:
                continue
            rebuilt_count += 1
            # Raw values first: normalising (JSON text, datetimes) only when they differ.
            if found is None and tuple(stored) != rebuilt_row:
                stored_row, rebuilt_row = _normalised(stored), _normalised(rebuilt_row)
                if stored_row != rebuilt_row:
                    found = (
                        f"{table.name}: stored row {stored_row!r} differs from rebuilt "
                        f"{rebuilt_row!r}"
                    )
    finally:
        await live.close()
    rebuilt_count += sum(1 for _ in rebuilt)
    if stored_count != rebuilt_count:
        return f"{table.name}: {stored_count} rows stored, {rebuilt_count} rebuilt from the log"
    return found
