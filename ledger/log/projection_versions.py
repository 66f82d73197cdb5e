"""Which version of each projection's code built its rows.

A projector declares ``version`` (``Projector.version``); ``projection_versions`` records, per
projection, the version whose rows the tables hold. A projection is *stale* when its row is
missing (a projection new to this database) or names another version (its code changed, or a
revision marked it: version 0, which no code has). A stale projection is rebuilt from the log
by ``ledger db upgrade`` (log/rebuild.py), never by a migration running projection code: a
migration changes DDL and, where its derived rows would need projection code, marks instead.
``ledger serve`` refuses a database with a stale projection, as it refuses one behind head.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Column, Connection, DateTime, Integer, String, Table, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.metadata import metadata
from ledger.log.projector import Projector
from ledger.log.view_builds import read_builds

# The version a revision writes to ask for a rebuild; projector versions start at 1.
MARKED_FOR_REBUILD = 0

projection_versions = Table(
    "projection_versions",
    metadata,
    Column("projection", String(100), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)


def recorded_versions(conn: Connection) -> dict[str, int]:
    """Each projection's recorded version; for the views while an upgrade's build of them runs
    beside the live ones (view_builds.py), the version that build writes: it is swapped in when
    it reaches the head, so the views are not stale for the code that started it."""
    rows = conn.execute(select(projection_versions.c.projection, projection_versions.c.version))
    recorded = {str(row.projection): int(row.version) for row in rows}
    building = read_builds(conn).building
    return recorded if building is None else recorded | building.versions


def stale_projections(recorded: dict[str, int], projectors: Sequence[Projector]) -> list[str]:
    """The projections whose rows are not those of the running code, in projector order."""
    return [p.name for p in projectors if recorded.get(p.name) != p.version]


async def stale_projections_async(
    conn: AsyncConnection, projectors: Sequence[Projector]
) -> list[str]:
    return stale_projections(await conn.run_sync(recorded_versions), projectors)


def record_versions(conn: Connection, projectors: Sequence[Projector]) -> None:
    """Record that the projectors' rows are now those of their code's versions."""
    names = [p.name for p in projectors]
    conn.execute(delete(projection_versions).where(projection_versions.c.projection.in_(names)))
    now = datetime.now(UTC)
    conn.execute(
        projection_versions.insert(),
        [{"projection": p.name, "version": p.version, "updated_at": now} for p in projectors],
    )
