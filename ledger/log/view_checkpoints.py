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
    case,
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
    # Set when an upgrade started a build of the views beside the live ones: the head of the
    # log then, which the build must reach; NULL again once it is swapped in
    # (log/view_builds.py).
    Column("rebuild_until", BigInteger, nullable=True),
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


def mark_build_running(conn: Connection, names: Sequence[str], head: int) -> None:
    """A build of the views of ``names`` runs beside them and must reach ``head``: their
    checkpoints stay where the live build is, with ``rebuild_until`` set until it is swapped
    in (log/view_builds.py)."""
    for name in names:
        found = conn.execute(
            select(view_checkpoints.c.projection).where(view_checkpoints.c.projection == name)
        ).first()
        if found is None:
            conn.execute(
                view_checkpoints.insert().values(
                    projection=name, seq=0, updated_at=datetime.now(UTC)
                )
            )
    conn.execute(
        update(view_checkpoints)
        .where(view_checkpoints.c.projection.in_(list(names)))
        .values(rebuild_until=head or None)
    )


def rebuild_until(conn: Connection, names: Sequence[str]) -> int | None:
    """The head the views of ``names`` were being rebuilt to, while one of them is."""
    value = conn.execute(
        select(func.max(view_checkpoints.c.rebuild_until)).where(
            view_checkpoints.c.projection.in_(list(names))
        )
    ).scalar()
    return None if value is None else int(value)


def write_projected_seq(
    conn: Connection, names: Sequence[str], seq: int, *, building: bool = False
) -> None:
    """The views of ``names`` have applied the log up to ``seq``. ``building``: the live views
    kept current while a build runs beside them, which ``rebuild_until`` goes on saying (the
    swap clears it)."""
    now = datetime.now(UTC)
    until = view_checkpoints.c.rebuild_until
    # A rebuild ends when its view reaches the head it was started at.
    ends = until if building else case((until > seq, until), else_=None)
    for name in names:
        changed = conn.execute(
            update(view_checkpoints)
            .where(view_checkpoints.c.projection == name)
            .values(seq=seq, updated_at=now, rebuild_until=ends)
        ).rowcount
        if not changed:
            conn.execute(view_checkpoints.insert().values(projection=name, seq=seq, updated_at=now))
