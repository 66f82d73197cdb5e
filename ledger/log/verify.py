"""`ledger verify`: recompute the hash chain, and rebuild every projection from seq 0 and compare.

Projections are rebuilt into a scratch SQLite file whatever the live backend is, since they are
pure functions of the events; rows are compared as normalised Python values.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Table, create_engine, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.canonical import sha256_hex
from ledger.log.chain import GENESIS_HASH, canonical_header, chain_hash
from ledger.log.events import Catalogue
from ledger.log.metadata import metadata
from ledger.log.projector import Projector
from ledger.log.records import as_utc
from ledger.log.tables import events
from ledger.log.transaction import row_to_event

Progress = Callable[[int], None]


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

    @property
    def ok(self) -> bool:
        return not self.differences


async def verify_chain(
    conn: AsyncConnection, *, progress: Progress | None = None, batch: int = 2000
) -> ChainReport:
    report = ChainReport()
    prev_hash = GENESIS_HASH
    expected_seq = 1
    result = await conn.stream(
        select(events).order_by(events.c.seq).execution_options(yield_per=batch)
    )
    async for row in result:
        report.events += 1
        if progress is not None:
            progress(1)
        problem = None
        if row.seq != expected_seq:
            problem = f"seq {row.seq} found where {expected_seq} was expected (gap in the log)"
        elif row.payload is not None and sha256_hex(row.payload.encode()) != row.payload_sha256:
            problem = "payload does not match payload_sha256"
        else:
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
                problem = "hash does not match the chain (header, payload or predecessor changed)"
        if problem is not None:
            report.first_bad_seq = row.seq
            report.problem = problem
            await result.close()
            return report
        prev_hash = row.hash
        expected_seq += 1
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
    conn: AsyncConnection,
    catalogue: Catalogue,
    projectors: Sequence[Projector],
    *,
    progress: Progress | None = None,
    batch: int = 2000,
) -> ProjectionReport:
    report = ProjectionReport()
    tables = [table for projector in projectors for table in projector.tables]
    with tempfile.TemporaryDirectory(prefix="ledger-verify-") as scratch_dir:
        scratch = create_engine(f"sqlite+pysqlite:///{Path(scratch_dir) / 'scratch.db'}")
        try:
            metadata.create_all(scratch, tables=tables)
            with scratch.begin() as scratch_conn:
                result = await conn.stream(
                    select(events).order_by(events.c.seq).execution_options(yield_per=batch)
                )
                async for row in result:
                    event = row_to_event(row, catalogue)
                    for projector in projectors:
                        if projector.handles(event.kind):
                            projector.apply(scratch_conn, event)
                    for projector in projectors:
                        projector.flush(scratch_conn)
                    if progress is not None:
                        progress(1)
            with scratch.connect() as scratch_conn:
                for table in tables:
                    live_rows = (await conn.execute(select(table).order_by(*_key(table)))).all()
                    rebuilt_rows = scratch_conn.execute(select(table).order_by(*_key(table))).all()
                    live = [tuple(_normalise(v) for v in r) for r in live_rows]
                    rebuilt = [tuple(_normalise(v) for v in r) for r in rebuilt_rows]
                    if live != rebuilt:
                        report.differences.append(_describe(table, live, rebuilt))
        finally:
            scratch.dispose()
    return report


def _describe(table: Table, live: list[tuple[Any, ...]], rebuilt: list[tuple[Any, ...]]) -> str:
    if len(live) != len(rebuilt):
        return f"{table.name}: {len(live)} rows stored, {len(rebuilt)} rebuilt from the log"
    for stored_row, rebuilt_row in zip(live, rebuilt, strict=True):
        if stored_row != rebuilt_row:
            return f"{table.name}: stored row {stored_row!r} differs from rebuilt {rebuilt_row!r}"
    return f"{table.name}: rows differ"
