"""The event log for the live tail: by seq, without payloads (a capture can be megabytes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.tables import events


@dataclass(frozen=True)
class TailEvent:
    seq: int
    recorded_at: datetime
    kind: str
    rollout_id: str | None
    generation: int
    hash: str


_COLUMNS = (
    events.c.seq,
    events.c.recorded_at,
    events.c.kind,
    events.c.rollout_id,
    events.c.generation,
    events.c.hash,
)


async def events_after(conn: AsyncConnection, after: int, limit: int) -> list[TailEvent]:
    found = await conn.execute(
        select(*_COLUMNS).where(events.c.seq > after).order_by(events.c.seq).limit(limit)
    )
    return [TailEvent(*r) for r in found]


async def newest_events(conn: AsyncConnection, limit: int) -> tuple[list[TailEvent], int]:
    """The newest ``limit`` events, oldest first, and the head seq (0 for an empty log)."""
    found = await conn.execute(select(*_COLUMNS).order_by(events.c.seq.desc()).limit(limit))
    rows = [TailEvent(*r) for r in found][::-1]
    head = rows[-1].seq if rows else 0
    return rows, head


async def head_seq(conn: AsyncConnection) -> int:
    value = (await conn.execute(select(func.max(events.c.seq)))).scalar()
    return int(value or 0)
