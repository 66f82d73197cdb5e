"""How far each view (a projection that follows the log) has applied it.

One row per view, written by the projection follower in the transaction that writes the view's
rows (log/projection_follower.py): every event with ``seq`` at or below it is reflected in the
view, none after it. A projection of the write side has no row: it commits with the append, so
it is always at the head. The ``projection_status`` SQL view joins this table with
``projection_versions`` and the head (docs/sql.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    String,
    Table,
    bindparam,
    func,
    select,
    update,
)

from ledger.log.metadata import metadata

view_checkpoints = Table(
    "view_checkpoints",
    metadata,
    Column("projection", String(100), primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

_SELECT = select(func.min(view_checkpoints.c.seq), func.count()).where(
    view_checkpoints.c.projection.in_(bindparam("names", expanding=True))
)


def projected_seq(conn: Connection, names: Sequence[str]) -> int:
    """The seq every view of ``names`` has reached (0 for a view with no row yet)."""
    if not names:
        raise ValueError("no views named")
    row = conn.execute(_SELECT, {"names": list(names)}).one()
    if int(row[1]) < len(set(names)):
        return 0
    return int(row[0])


def write_projected_seq(conn: Connection, names: Sequence[str], seq: int) -> None:
    now = datetime.now(UTC)
    for name in names:
        changed = conn.execute(
            update(view_checkpoints)
            .where(view_checkpoints.c.projection == name)
            .values(seq=seq, updated_at=now)
        ).rowcount
        if not changed:
            conn.execute(view_checkpoints.insert().values(projection=name, seq=seq, updated_at=now))
