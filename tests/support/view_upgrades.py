"""What the tests of upgrades that rebuild the views share: a view marked stale as a revision
marks it, a statement run in its own committed transaction, and verify's differences."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from ledger.app.areas import default_catalogue, default_projectors
from ledger.log.engines import create_async_db_engine
from ledger.log.projection_versions import projection_versions
from ledger.log.verify import verify_projections


async def run_committed(url: str, fn: Any) -> Any:
    """``fn(connection)`` in a transaction of its own, committed."""
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(fn)
    finally:
        await engine.dispose()


def mark_observations_stale(conn: Connection) -> None:
    """What a revision does when the observations view's rows need its code: mark it."""
    conn.execute(
        projection_versions.update()
        .where(projection_versions.c.projection == "observations")
        .values(version=0)
    )


async def verify_differences(url: str) -> list[str]:
    """``ledger verify``'s projection differences (empty: every projection as the log says)."""
    engine = create_async_db_engine(url, read_only=True, null_pool=True)
    try:
        report = await verify_projections(
            engine, default_catalogue(), default_projectors(check_templates=True)
        )
    finally:
        await engine.dispose()
    return report.differences
