"""Read queries over the event log and the core projection (async, read-only connections)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.events import Catalogue
from ledger.log.records import RolloutState, StoredEvent
from ledger.log.tables import events, rollouts
from ledger.log.transaction import row_to_event


async def read_events(
    conn: AsyncConnection,
    catalogue: Catalogue,
    *,
    after: int = 0,
    limit: int = 100,
    rollout_id: str | None = None,
) -> list[StoredEvent]:
    query = select(events).where(events.c.seq > after).order_by(events.c.seq).limit(limit)
    if rollout_id is not None:
        query = query.where(events.c.rollout_id == rollout_id)
    rows = (await conn.execute(query)).all()
    return [row_to_event(row, catalogue) for row in rows]


async def head_seq(conn: AsyncConnection) -> int:
    value = (await conn.execute(select(func.max(events.c.seq)))).scalar()
    return int(value or 0)


async def get_rollout(conn: AsyncConnection, rollout_id: str) -> RolloutState | None:
    row = (await conn.execute(select(rollouts).where(rollouts.c.rollout_id == rollout_id))).first()
    return None if row is None else RolloutState.from_row(row)
