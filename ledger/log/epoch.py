"""The log's epoch: a random id stored in ``log_identity``, new at creation and at restore.

A restored copy is a prefix of the log it was taken from, and its head grows again from there:
the same seq can then name another event than the one a reader remembered. Whatever keeps a
position in the log keeps the epoch beside it and trusts the position only in the same epoch.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import Connection, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.tables import log_identity

EPOCH = "epoch"


def new_epoch() -> str:
    return uuid.uuid4().hex


def set_epoch(conn: Connection, epoch: str | None = None) -> str:
    """Give the log a new epoch (or ``epoch``); returns it."""
    value = epoch or new_epoch()
    conn.execute(delete(log_identity).where(log_identity.c.name == EPOCH))
    conn.execute(insert(log_identity).values(name=EPOCH, value=value, updated_at=datetime.now(UTC)))
    return value


def read_epoch_sync(conn: Connection) -> str | None:
    return conn.execute(select(log_identity.c.value).where(log_identity.c.name == EPOCH)).scalar()


async def read_epoch(conn: AsyncConnection) -> str | None:
    return (
        await conn.execute(select(log_identity.c.value).where(log_identity.c.name == EPOCH))
    ).scalar()
