"""SQL of the JSONL mirror: its checkpoint, and which rollouts events touched."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.records import as_utc
from ledger.log.tables import events, rollouts
from ledger.mirror.tables import mirror_checkpoints

MIRROR_CHECKPOINT = "jsonl-mirror"


def write_checkpoint(conn: Connection, seq: int, *, name: str = MIRROR_CHECKPOINT) -> None:
    now = datetime.now(UTC)
    updated = conn.execute(
        update(mirror_checkpoints)
        .where(mirror_checkpoints.c.name == name)
        .values(seq=seq, updated_at=now)
    ).rowcount
    if not updated:
        conn.execute(insert(mirror_checkpoints).values(name=name, seq=seq, updated_at=now))


async def read_checkpoint(conn: AsyncConnection, *, name: str = MIRROR_CHECKPOINT) -> int:
    value = (
        await conn.execute(
            select(mirror_checkpoints.c.seq).where(mirror_checkpoints.c.name == name)
        )
    ).scalar()
    return int(value or 0)


async def recorded_at_of(conn: AsyncConnection, seq: int) -> datetime | None:
    value = (await conn.execute(select(events.c.recorded_at).where(events.c.seq == seq))).scalar()
    return None if value is None else as_utc(value)


async def rollouts_touched(
    conn: AsyncConnection, *, after: int, upto: int, start_after: str = "", limit: int = 1000
) -> list[str]:
    """One page of the distinct rollout ids of the events with ``after < seq <= upto``."""
    rows = await conn.execute(
        select(events.c.rollout_id)
        .where(events.c.seq > after, events.c.seq <= upto, events.c.rollout_id > start_after)
        .group_by(events.c.rollout_id)
        .order_by(events.c.rollout_id)
        .limit(limit)
    )
    return [row.rollout_id for row in rows]


async def rollout_ids(
    conn: AsyncConnection, *, start_after: str = "", limit: int = 1000
) -> list[str]:
    """One page of every rollout id the ledger knows, in id order."""
    rows = await conn.execute(
        select(rollouts.c.rollout_id)
        .where(rollouts.c.rollout_id > start_after)
        .order_by(rollouts.c.rollout_id)
        .limit(limit)
    )
    return [row.rollout_id for row in rows]
