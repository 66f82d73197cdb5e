"""SQL of the JSONL mirror: its checkpoint, and which rollouts events touched."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.epoch import read_epoch, read_epoch_sync
from ledger.log.queries import head_seq
from ledger.log.records import as_utc
from ledger.log.tables import events, rollouts
from ledger.mirror.tables import mirror_checkpoints

MIRROR_CHECKPOINT = "jsonl-mirror"


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    # Written in the log's current epoch: otherwise (a restored copy) the same seq may name
    # other events, and the files must be rebuilt rather than caught up.
    trusted: bool


def write_checkpoint(conn: Connection, seq: int, *, name: str = MIRROR_CHECKPOINT) -> None:
    now = datetime.now(UTC)
    epoch = read_epoch_sync(conn)
    updated = conn.execute(
        update(mirror_checkpoints)
        .where(mirror_checkpoints.c.name == name)
        .values(seq=seq, updated_at=now, epoch=epoch)
    ).rowcount
    if not updated:
        conn.execute(
            insert(mirror_checkpoints).values(name=name, seq=seq, updated_at=now, epoch=epoch)
        )


async def load_checkpoint(conn: AsyncConnection, *, name: str = MIRROR_CHECKPOINT) -> Checkpoint:
    row = (
        await conn.execute(
            select(mirror_checkpoints.c.seq, mirror_checkpoints.c.epoch).where(
                mirror_checkpoints.c.name == name
            )
        )
    ).first()
    if row is None:
        return Checkpoint(seq=0, trusted=True)
    return Checkpoint(seq=int(row.seq), trusted=row.epoch == await read_epoch(conn))


async def read_checkpoint(conn: AsyncConnection, *, name: str = MIRROR_CHECKPOINT) -> int:
    """The seq the mirror's files reflect; 0 for a checkpoint of another epoch."""
    checkpoint = await load_checkpoint(conn, name=name)
    return checkpoint.seq if checkpoint.trusted else 0


async def recorded_at_of(conn: AsyncConnection, seq: int) -> datetime | None:
    value = (await conn.execute(select(events.c.recorded_at).where(events.c.seq == seq))).scalar()
    return None if value is None else as_utc(value)


@dataclass(frozen=True)
class MirrorLag:
    """How far the mirror's files are behind the log, as the database says."""

    checkpoint: int
    head: int
    oldest_unmirrored: datetime | None
    """When the first event after the checkpoint was recorded; None when there is none."""

    @property
    def events(self) -> int:
        return max(0, self.head - self.checkpoint)

    def seconds(self, now: datetime) -> float:
        if self.oldest_unmirrored is None:
            return 0.0
        return max(0.0, (now - self.oldest_unmirrored).total_seconds())


async def read_lag(conn: AsyncConnection) -> MirrorLag:
    """The lag from the saved checkpoint (call it inside one snapshot). Read from the database,
    not from a follower, so it is true whatever the follower is doing: recovering, failing,
    or not running in this process at all."""
    checkpoint = await read_checkpoint(conn)
    head = await head_seq(conn)
    oldest = await recorded_at_of(conn, checkpoint + 1) if head > checkpoint else None
    return MirrorLag(checkpoint=checkpoint, head=head, oldest_unmirrored=oldest)


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
