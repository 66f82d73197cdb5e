"""Projection versions (log/projection_versions.py) and their rebuild from the log
(log/rebuild.py): what ``ledger db upgrade`` rebuilds (the write side in place, the views by
their follower from seq 0 while appends go on), what ``serve`` and ``db check`` refuse, and the
two ways a database gets the versions table (revision 0005, or 0010 for a database that passed
through 0005 before it made the table)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import Connection, func, select, text

from ledger.app.areas import (
    default_catalogue,
    default_projectors,
    view_projectors,
    views_follower,
    write_side_projectors,
)
from ledger.app.bootstrap import ensure_database_ready, upgrade_database
from ledger.areas.captures.service import CaptureService
from ledger.areas.health.follower import HealthFollower
from ledger.areas.health.tables import health_findings as hf
from ledger.areas.lineage.service import LineageService
from ledger.log import migrate
from ledger.log.errors import ProjectionsStale, ViewsBehind
from ledger.log.freshness import Freshness
from ledger.log.projection_versions import projection_versions
from ledger.log.projector import Projector
from ledger.log.rebuild import ensure_projections_current, rebuild_stale_projections
from ledger.log.rollouts_projection import RolloutsProjector
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from ledger.log.view_builds import read_builds
from ledger.log.view_checkpoints import view_checkpoints
from tests.cli.support import invoke
from tests.support.exchanges import chat_exchange, responses_exchange
from tests.support.view_upgrades import (
    mark_observations_stale,
    run_committed,
    verify_differences,
)

# The write side's projections, then the views that follow the log.
PROJECTIONS = [
    "rollouts",
    "captures",
    "lineage",
    "runs",
    "evidence",
    "capture_calls",
    "observations",
]
# Each projection's version today: the captures' write side is at 2 since the capture view
# took its derived rows (revision 0018), the observations view since its entries take their
# payloads from the log (revision 0021).
VERSIONS = {**dict.fromkeys(PROJECTIONS, 1), "captures": 2, "observations": 2}


class RolloutsProjectorV2(RolloutsProjector):
    """The rollouts projection as if its code had changed (same rows, a new version)."""

    version = 2


def _versions(conn: Connection) -> dict[str, int]:
    rows = conn.execute(select(projection_versions.c.projection, projection_versions.c.version))
    return {str(row[0]): int(row[1]) for row in rows}


def _events(conn: Connection) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(select(events).order_by(events.c.seq))]


async def _write_some(url: str) -> None:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        captures = CaptureService(store)
        for n in range(6):
            make = chat_exchange if n % 2 else responses_exchange
            await captures.append(f"r{n % 3}", make(model_call_id=f"c{n}"))
        await LineageService(store).delete(["r1"])
        await captures.append("r1", chat_exchange(model_call_id="again"))
        await LineageService(store).retire(["r2"])
    finally:
        await store.close()


async def _follow_views(url: str) -> int:
    """What the projector does after an upgrade emptied the views: the events it applied."""
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        return await views_follower(store).catch_up()
    finally:
        await store.close()


def _checkpoints(conn: Connection) -> dict[str, int]:
    rows = conn.execute(select(view_checkpoints.c.projection, view_checkpoints.c.seq))
    return {str(row[0]): int(row[1]) for row in rows}


def _rebuilds(conn: Connection) -> dict[str, int | None]:
    rows = conn.execute(select(view_checkpoints.c.projection, view_checkpoints.c.rebuild_until))
    return {str(row[0]): row[1] for row in rows}


async def test_a_new_database_records_every_projection_at_its_version(database_url: str) -> None:
    assert await run_committed(database_url, _versions) == VERSIONS
    assert [p.name for p in default_projectors()] == PROJECTIONS
    assert {p.name: p.version for p in default_projectors()} == VERSIONS
    await ensure_database_ready(database_url)
    report = await upgrade_database(database_url)
    assert report is not None and report.stale == []


async def test_a_changed_projection_is_rebuilt_from_the_log(database_url: str) -> None:
    url = database_url
    await _write_some(url)
    # The views at the head, as a projector leaves them (else verify waits for them, in vain).
    await _follow_views(url)
    before = await run_committed(url, _events)
    projectors: list[Projector] = [RolloutsProjectorV2(), *default_projectors()[1:]]
    with pytest.raises(ProjectionsStale):
        await ensure_projections_current(url, projectors)
    # Damage a projection row: the rebuild must write it again from the log.
    await run_committed(url, lambda c: c.execute(text("UPDATE rollouts SET state = 'x'")))
    assert await verify_differences(url) != []

    report = await rebuild_stale_projections(url, default_catalogue(), projectors)
    assert report.stale == ["rollouts"] and report.events == len(before)
    assert await run_committed(url, _versions) == {**VERSIONS, "rollouts": 2}
    assert await run_committed(url, _events) == before  # the log is never touched
    # The views may read the write side's rows: a build of them starts from seq 0.
    assert report.views_reset
    building = (await run_committed(url, read_builds)).building
    assert building is not None and building.seq == 0
    assert await _follow_views(url) == len(before)
    assert await verify_differences(url) == []
    # The running code's projections (version 1 of rollouts) now see a stale rollouts row.
    with pytest.raises(ProjectionsStale, match="rollouts"):
        await ensure_database_ready(url)
    again = await upgrade_database(url)
    assert again is not None and again.stale == ["rollouts"]
    await ensure_database_ready(url)


async def test_a_projection_new_to_the_database_is_built(database_url: str) -> None:
    await _write_some(database_url)
    await run_committed(
        database_url,
        lambda c: c.execute(
            projection_versions.delete().where(projection_versions.c.projection == "lineage")
        ),
    )
    with pytest.raises(ProjectionsStale, match="lineage"):
        await ensure_database_ready(database_url)
    report = await upgrade_database(database_url)
    assert report is not None and report.stale == ["lineage"]
    assert await run_committed(database_url, _versions) == VERSIONS
    assert report.views_events == await run_committed(database_url, lambda c: len(_events(c)))
    assert await verify_differences(database_url) == []


async def test_0010_gives_a_database_upgraded_by_the_earlier_0005_its_versions(
    database_url: str,
) -> None:
    """The 0005 before this change filled its columns itself and made no versions table; a
    database it upgraded reaches 0008 without one. Simulated: 0008, then the table dropped."""
    url = database_url
    await _write_some(url)
    await migrate.downgrade(url, "0008_follow")
    await run_committed(url, lambda c: c.execute(text("DROP TABLE projection_versions")))
    await migrate.upgrade(url)
    # 0015 (after 0010) finds rows and captures in the log and marks its new projection.
    assert await run_committed(url, _versions) == {**VERSIONS, "evidence": 0}
    report = await upgrade_database(url)
    assert report is not None and report.stale == ["evidence"]
    await ensure_database_ready(url)
    assert await verify_differences(url) == []


def test_db_check_refuses_a_stale_projection_and_db_upgrade_rebuilds_it(
    database_url: str,
) -> None:
    asyncio.run(run_committed(database_url, mark_observations_stale))
    checked = invoke(database_url, "db", "check")
    assert checked.exit_code == 1
    assert "observations" in checked.output and "ledger db upgrade" in checked.output
    upgraded = invoke(database_url, "db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    # A view: only the views are rebuilt, by their follower, before the command exits.
    assert "stale projections: observations" in upgraded.output
    assert "rebuilt the views from the log" in upgraded.output
    assert "write side" not in upgraded.output
    assert invoke(database_url, "db", "check").exit_code == 0
    assert invoke(database_url, "verify").exit_code == 0


async def test_a_stale_view_is_rebuilt_while_appends_go_on(database_url: str) -> None:
    """``serve --upgrade``'s way: the upgrade only starts a build of the views beside the live
    ones (no replay under the writer's lock); the projector fills it a page at a time while
    captures are appended, none of which fails or waits for the build to end."""
    url = database_url
    await _write_some(url)
    assert await _follow_views(url) > 0  # the live views at the head, as a projector leaves them
    await run_committed(url, mark_observations_stale)
    report = await upgrade_database(url, build_views=False)
    assert report is not None and report.stale == ["observations"]
    assert report.events == 0 and report.views_reset  # the write side was left as it was
    head = len(await run_committed(url, _events))
    # The live views stay where they were (at the head) while the build runs.
    assert await run_committed(url, _checkpoints) == {"capture_calls": head, "observations": head}
    assert await run_committed(url, _rebuilds) == {"capture_calls": head, "observations": head}
    await ensure_database_ready(url)  # servable at once

    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        names = [view.name for view in view_projectors()]
        freshness = Freshness(store, names, bound_s=0.05)
        captures = CaptureService(store)
        await captures.append("w0", chat_exchange(model_call_id="before"))
        # A read past the live views' seq, past the wait's bound, says why it waited.
        with pytest.raises(
            ViewsBehind,
            match=rf"building the views beside the live ones \(seq 0 of {head + 1}\)",
        ):
            await freshness.wait_for_seq(head + 1)
        assert (await freshness.progress()).rebuild_until == head
        # Pages of one event: the build takes many turns of the write lock.
        follower = views_follower(store, page_events=1)
        head_at_upgrade = len(await run_committed(url, _events))
        # For each append: how far the build was when it was acknowledged.
        rebuilt_at_ack = []

        def built(conn: Connection) -> int:
            building = read_builds(conn).building
            return head_at_upgrade if building is None else building.seq

        async def append() -> None:
            for n in range(20):
                await captures.append(f"w{n % 4}", chat_exchange(model_call_id=f"w{n}"))
                rebuilt_at_ack.append(await store.read_sync(built))
                await asyncio.sleep(0)

        await asyncio.gather(follower.catch_up(), append())
        assert len(rebuilt_at_ack) == 20
        # Appends were acknowledged while the views were still being rebuilt.
        assert min(rebuilt_at_ack) < head_at_upgrade, rebuilt_at_ack
        await follower.catch_up()
        assert (await freshness.progress()).rebuild_until is None
    finally:
        await store.close()
    assert await run_committed(url, _rebuilds) == {"capture_calls": None, "observations": None}
    assert await verify_differences(url) == []


async def test_the_health_findings_are_checked_again_after_the_views_are_rebuilt(
    database_url: str,
) -> None:
    """A health row passes for current while its record's ``last_seq`` matches, which a rebuild
    gives back unchanged: the findings stay while the live build answers, are emptied when the
    new build is swapped in, and the health follower checks every rebuilt record again."""
    url = database_url
    await _write_some(url)

    async def follow(*, health: bool) -> int:
        store = LedgerStore(url, default_catalogue(), write_side_projectors())
        await store.open()
        try:
            await views_follower(store).catch_up()
            return await HealthFollower(store).catch_up() if health else 0
        finally:
            await store.close()

    def findings(conn: Connection) -> int:
        return int(conn.execute(select(func.count()).select_from(hf)).scalar_one())

    checked = await follow(health=True)
    rows = await run_committed(url, findings)
    assert checked == rows > 0
    await run_committed(url, mark_observations_stale)
    report = await upgrade_database(url, build_views=False)
    assert report is not None and report.views_reset
    assert await run_committed(url, findings) == rows  # true of the live build, which still answers
    await follow(health=False)  # the build reaches the head and is swapped in
    assert await run_committed(url, findings) == 0
    assert await follow(health=True) == rows
