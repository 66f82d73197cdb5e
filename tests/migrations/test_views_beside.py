"""An upgrade builds the views beside the live ones and swaps the build in when it reaches the
head (log/view_builds.py): reads go on from the live build, appends never wait for the build,
and the swap is atomic. Revision 0022 moves the views into their first build and back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Connection, func, inspect, select

from ledger.app.areas import (
    default_catalogue,
    view_projectors,
    views_follower,
    write_side_projectors,
)
from ledger.app.bootstrap import upgrade_database
from ledger.areas.captures.calls_view import CaptureCallsView
from ledger.areas.captures.service import CaptureService
from ledger.areas.captures.tables import capture_calls
from ledger.areas.health.follower import HealthFollower
from ledger.areas.health.tables import health_findings
from ledger.areas.observations.projection import ObservationsProjector
from ledger.areas.observations.queries import read_record_text_sync
from ledger.log import migrate
from ledger.log.engines import create_async_db_engine
from ledger.log.errors import ViewsBehind
from ledger.log.freshness import Freshness
from ledger.log.projection_versions import projection_versions, recorded_versions
from ledger.log.rebuild import rebuild_stale_projections
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from ledger.log.view_builds import FIRST_BUILD, Builds, read_builds, table_name
from ledger.log.view_checkpoints import view_checkpoints
from tests.support.exchanges import chat_exchange, responses_exchange
from tests.support.templates import PostgresCopies
from tests.support.view_upgrades import (
    mark_observations_stale,
    run_committed,
    verify_differences,
)

ROLLOUTS = ["r0", "r1", "r2"]


class ObservationsProjectorV3(ObservationsProjector):
    """The observations view as a later release has it (same rows, a new version)."""

    version = 3


VIEW_TABLES = sorted(table.name for view in view_projectors() for table in view.tables)
NAMES = [view.name for view in view_projectors()]


async def _opened(url: str) -> LedgerStore:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    return store


async def _write_and_follow(url: str) -> None:
    store = await _opened(url)
    try:
        captures = CaptureService(store)
        for n in range(9):
            make = chat_exchange if n % 2 else responses_exchange
            await captures.append(ROLLOUTS[n % 3], make(model_call_id=f"c{n}"))
        await views_follower(store).catch_up()
    finally:
        await store.close()


def _records(conn: Connection) -> dict[str, str | None]:
    return {rollout: read_record_text_sync(conn, rollout) for rollout in ROLLOUTS}


def _findings(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(health_findings)).scalar_one())


def _call_rows(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(capture_calls)).scalar_one())


def _relations(conn: Connection) -> tuple[set[str], set[str]]:
    found = inspect(conn)
    return set(found.get_table_names()), set(found.get_view_names())


def _head(conn: Connection) -> int:
    return int(conn.execute(select(func.max(events.c.seq))).scalar_one())


def _checkpoints(conn: Connection) -> dict[str, tuple[int, int | None]]:
    rows = conn.execute(
        select(
            view_checkpoints.c.projection, view_checkpoints.c.seq, view_checkpoints.c.rebuild_until
        )
    )
    return {str(row[0]): (int(row[1]), row[2]) for row in rows}


@dataclass(frozen=True)
class _Before:
    """What the live views answered before the upgrade."""

    records: dict[str, str | None]
    call_rows: int
    head: int


async def _upgraded_with_a_build(url: str, *, other_columns: bool = False) -> _Before:
    """A database written and followed, then upgraded with the observations view stale, its
    build left to run. ``other_columns``: the live build's tables have a column the running
    code does not write (as after a release that changed a view's columns)."""
    await _write_and_follow(url)
    before = _Before(
        records=await run_committed(url, _records),
        call_rows=await run_committed(url, _call_rows),
        head=await run_committed(url, _head),
    )
    assert all(before.records.values()) and before.call_rows == 9
    if other_columns:
        await run_committed(
            url,
            lambda conn: conn.exec_driver_sql(
                f'ALTER TABLE "{table_name("capture_calls", FIRST_BUILD)}" ADD COLUMN note TEXT'
            ),
        )
    await run_committed(url, mark_observations_stale)
    report = await upgrade_database(url, build_views=False)
    assert report is not None and report.views_reset

    builds: Builds = await run_committed(url, read_builds)
    assert builds.live.build == 1
    assert builds.building is not None and builds.building.build == 2
    assert builds.building.seq == 0 and builds.building.until_seq == before.head
    tables, views = await run_committed(url, _relations)
    assert {f"{name}_b1" for name in VIEW_TABLES} <= tables
    assert {f"{name}_b2" for name in VIEW_TABLES} <= tables
    assert set(VIEW_TABLES) <= views
    # Not stale for the code that started the build: ``serve`` starts on it.
    assert (await run_committed(url, recorded_versions))["observations"] == 2
    return before


async def _old_build_dropped(url: str, old: int) -> None:
    """The build a swap retired keeps its tables, for the follower to drop later in steps of
    their own (a few rows each here: every table takes several), then its row goes."""
    builds = await run_committed(url, read_builds)
    assert builds.retired == (old,)
    tables, _ = await run_committed(url, _relations)
    assert {table_name(name, old) for name in VIEW_TABLES} <= tables
    store = await _opened(url)
    try:
        follower = views_follower(store, retired_rows=2)
        steps = 0
        while not await follower.drop_retired_step(old):
            steps += 1
            # Reads go on from the new build meanwhile.
            assert await store.read_sync(_call_rows) > 0
        if url.startswith("sqlite"):
            assert steps > len(VIEW_TABLES)
        else:  # PostgreSQL unlinks a dropped table's files: one step drops them all
            assert steps == 0
    finally:
        await store.close()
    assert (await run_committed(url, read_builds)).retired == ()
    tables, _ = await run_committed(url, _relations)
    assert not {table_name(name, old) for name in VIEW_TABLES} & tables


async def _swapped_in(url: str, before: _Before, appended: int) -> None:
    """After the swap: the same records, the new build's rows, the old build retired, then
    its tables dropped."""
    await _old_build_dropped(url, FIRST_BUILD)
    store = await _opened(url)
    try:
        await Freshness(store, NAMES, bound_s=0.2).wait_for_rollout("fresh")
        assert await store.read_sync(_records) == before.records
        assert await store.read_sync(_call_rows) == before.call_rows + appended
        head = await store.read_sync(_head)
        assert await store.read_sync(_checkpoints) == dict.fromkeys(NAMES, (head, None))
    finally:
        await store.close()
    builds = await run_committed(url, read_builds)
    assert builds.live.build == 2 and builds.building is None
    _, views = await run_committed(url, _relations)
    assert set(VIEW_TABLES) <= views
    versions = await run_committed(
        url,
        lambda conn: dict(
            conn.execute(select(projection_versions.c.projection, projection_versions.c.version))
            .tuples()
            .all()
        ),
    )
    assert versions["observations"] == 2
    assert await verify_differences(url) == []


async def test_a_build_beside_the_live_views_swaps_in_while_reads_and_appends_go_on(
    database_url: str,
) -> None:
    """An upgrade that changed what a view derives, not its columns: the live views take the
    appends meanwhile (by the running code), taking turns with the build."""
    url = database_url
    before = await _upgraded_with_a_build(url)
    store = await _opened(url)
    try:
        captures = CaptureService(store)
        # A step for the live views whenever they are behind: the test decides when they are.
        follower = views_follower(store, page_events=2, live_turn_s=0)
        freshness = Freshness(store, NAMES, bound_s=0.2)
        # The live build answers at once, as it had projected the log.
        assert await store.read_sync(_records) == before.records
        await freshness.wait_for_rollout("r0")
        steps = 0
        while (await follower.progress()).building is not None:
            if steps < 3:
                await captures.append("fresh", chat_exchange(model_call_id=f"f{steps}"))
            await follower.step()
            steps += 1
            if steps == 4:
                # Still building, and a rollout appended meanwhile reads from the live views.
                assert (await follower.progress()).building is not None
                await freshness.wait_for_rollout("fresh")
                assert await store.read_sync(_call_rows) == before.call_rows + 3
                assert await store.read_sync(_records) == before.records
                checkpoints = await store.read_sync(_checkpoints)
                # The live views are current; ``rebuild_until`` still says a build runs.
                assert checkpoints["observations"] == (before.head + 3, before.head)
        assert steps > 4
    finally:
        await store.close()
    await _swapped_in(url, before, appended=3)


async def test_live_views_with_other_columns_stay_as_they_were_until_the_swap(
    database_url: str,
) -> None:
    """An upgrade that changed a view's columns: the running code cannot write the live
    build's tables, so they answer as they were at the upgrade, and a rollout appended
    meanwhile waits for the swap (past the bound, a 503 naming the build)."""
    url = database_url
    before = await _upgraded_with_a_build(url, other_columns=True)
    store = await _opened(url)
    try:
        captures = CaptureService(store)
        follower = views_follower(store, page_events=2)
        freshness = Freshness(store, NAMES, bound_s=0.2)
        assert await store.read_sync(_records) == before.records
        await freshness.wait_for_rollout("r0")
        await captures.append("fresh", chat_exchange(model_call_id="f0"))
        with pytest.raises(ViewsBehind, match="building the views beside the live ones"):
            await freshness.wait_for_rollout("fresh")
        steps = 0
        while (await follower.progress()).building is not None:
            if steps < 3:
                await captures.append("fresh", chat_exchange(model_call_id=f"f{steps + 1}"))
            await follower.step()
            steps += 1
            if (await follower.progress()).building is not None:
                # Until the swap the stable names show the live build, whole and unchanged.
                assert await store.read_sync(_records) == before.records
                assert await store.read_sync(_call_rows) == before.call_rows
                assert (await store.read_sync(_checkpoints))["observations"] == (
                    before.head,
                    before.head,
                )
        assert steps > 3
    finally:
        await store.close()
    await _swapped_in(url, before, appended=4)


async def test_a_newer_upgrade_supersedes_a_build_that_has_not_finished(
    database_url: str,
) -> None:
    url = database_url
    await _write_and_follow(url)
    await run_committed(url, mark_observations_stale)
    await upgrade_database(url, build_views=False)
    # A later release whose observations view is at version 3, upgraded before the build ended.
    later = [*write_side_projectors(), CaptureCallsView(), ObservationsProjectorV3()]
    report = await rebuild_stale_projections(url, default_catalogue(), later)
    assert report.stale == ["observations"] and report.views_reset
    builds = await run_committed(url, read_builds)
    assert builds.live.build == 1
    assert builds.building is not None and builds.building.build == 3
    assert builds.building.versions == {"capture_calls": 1, "observations": 3}
    # The superseded build is retired: the follower drops its tables, then the swap's.
    assert builds.retired == (2,)
    store = await _opened(url)
    try:
        await views_follower(store).catch_up()
    finally:
        await store.close()
    builds = await run_committed(url, read_builds)
    assert builds.live.build == 3 and builds.retired == ()
    tables, _ = await run_committed(url, _relations)
    assert not {table_name(name, build) for name in VIEW_TABLES for build in (1, 2)} & tables
    assert await verify_differences(url) == []


async def test_the_running_follower_drops_a_retired_build_while_appends_go_on(
    database_url: str,
) -> None:
    url = database_url
    await _upgraded_with_a_build(url)
    store = await _opened(url)
    try:
        captures = CaptureService(store)
        follower = views_follower(store, retired_rows=2, retired_turn_s=0)
        await follower.start()
        deadline = time.monotonic() + 60
        appended = 0
        while (builds := await store.read_sync(read_builds)).building or builds.retired:
            assert time.monotonic() < deadline, f"not dropped: {builds}"
            await captures.append("fresh", chat_exchange(model_call_id=f"f{appended}"))
            appended += 1
        assert appended > 0
        await Freshness(store, NAMES, bound_s=5).wait_for_rollout("fresh")
        await follower.stop()
        assert await store.read_sync(_call_rows) == 9 + appended
    finally:
        await store.close()
    assert builds.live.build == 2
    tables, _ = await run_committed(url, _relations)
    assert not {table_name(name, FIRST_BUILD) for name in VIEW_TABLES} & tables
    assert await verify_differences(url) == []


async def test_the_health_follower_waits_while_the_views_are_built(database_url: str) -> None:
    """What it would check during a build is emptied at the swap: its serving loop waits for
    the swap, then checks the new build's records."""
    url = database_url
    await _upgraded_with_a_build(url)  # no findings yet: three records to check
    store = await _opened(url)
    health = HealthFollower(store, poll_seconds=0.01, settle_seconds=0, build_poll_seconds=0.01)
    try:
        await health.start()
        deadline = time.monotonic() + 30
        while health.waits_for_builds < 3:
            assert time.monotonic() < deadline, "the health follower did not wait for the build"
            await asyncio.sleep(0.01)  # poll
        assert health.checked == 0
        await views_follower(store).catch_up()  # the build is swapped in
        while health.checked < len(ROLLOUTS):
            assert time.monotonic() < deadline, f"checked {health.checked} records"
            await asyncio.sleep(0.01)  # poll
    finally:
        await health.stop()
        await store.close()
    assert await run_committed(url, _findings) == len(ROLLOUTS)


async def test_a_build_of_an_empty_log_is_swapped_in(database_url: str) -> None:
    url = database_url
    await migrate.upgrade(url)
    await run_committed(url, mark_observations_stale)
    report = await upgrade_database(url)  # follows the views: the build is swapped in at once
    assert report is not None and report.views_reset
    builds = await run_committed(url, read_builds)
    assert builds.live.build == 2 and builds.building is None


async def test_0022_down_and_up_from_a_later_build(database_url: str) -> None:
    """Down from a database whose live build is the second (its indexes named for it) and with
    a third being built: the stable tables come back with their rows and index names."""
    url = database_url
    await _write_and_follow(url)
    await run_committed(url, mark_observations_stale)
    await upgrade_database(url)  # build 2 swapped in
    records = await run_committed(url, _records)
    await run_committed(url, mark_observations_stale)
    await upgrade_database(url, build_views=False)  # build 3 left running
    await migrate.downgrade(url, "0021_entry_payloads_from_log")
    tables, views = await run_committed(url, _relations)
    assert set(VIEW_TABLES) <= tables
    assert not set(VIEW_TABLES) & views
    assert not {name for name in tables if name.rsplit("_", 1)[-1] in ("b2", "b3")}

    def indexes(conn: Connection) -> set[str]:
        found = inspect(conn)
        return {str(index["name"]) for name in VIEW_TABLES for index in found.get_indexes(name)}

    names = await run_committed(url, indexes)
    assert "ix_capture_calls_seq" in names and not any(name.endswith("_b2") for name in names)
    # The rows of build 2, read as the code before this revision read them.
    assert await run_committed(url, _records) == records
    await migrate.upgrade(url)
    builds = await run_committed(url, read_builds)
    assert builds.live.build == 1 and builds.building is None
    assert await run_committed(url, _records) == records
    assert await verify_differences(url) == []


@pytest.fixture
async def postgres_database_url(postgres_copies: PostgresCopies) -> AsyncIterator[str]:
    async with postgres_copies.url() as url:
        yield url


@pytest.mark.postgres
async def test_a_swap_gives_up_while_a_reader_holds_the_live_views(
    postgres_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL (a SQLite reader holds a snapshot, not the tables): a reader's transaction
    holds the live views, and the swap, which needs them alone, would wait for it with the
    append lock held; it gives up and is tried again."""
    url = postgres_database_url
    await _write_and_follow(url)
    await run_committed(url, mark_observations_stale)
    await upgrade_database(url, build_views=False)
    reader_engine = create_async_db_engine(url, null_pool=True)
    store = await _opened(url)
    try:
        async with reader_engine.connect() as reader:
            transaction = await reader.begin()
            assert await reader.run_sync(_call_rows) == 9  # holds the live views until it ends
            follower = views_follower(store)
            # The build's pages are applied; its swap gives up after the lock timeout.
            while (await follower.progress()).behind:
                await follower.step()
            assert await follower.step() == 0
            building = (await store.read_sync(read_builds)).building
            assert building is not None and building.seq == await store.read_sync(_head)
            # Appends go on meanwhile; the build is still beside the live views.
            await CaptureService(store).append("fresh", chat_exchange(model_call_id="during"))
            assert (await store.read_sync(read_builds)).live.build == 1
            # ``catch_up`` (what ``ledger db upgrade`` runs) waits until the reader is done: it
            # tries the swap again, and gives up again, while the reader holds the live views.
            caplog.clear()
            waiting = asyncio.create_task(follower.catch_up())
            deadline = time.monotonic() + 60
            while caplog.text.count("waits to be swapped in") < 2:
                assert not waiting.done()
                assert time.monotonic() < deadline, "the swap was not tried again"
                await asyncio.sleep(0.05)  # poll
            assert not waiting.done()
            await transaction.commit()
            await waiting
        assert (await store.read_sync(read_builds)).live.build == 2
        assert await store.read_sync(_call_rows) == 10
    finally:
        await store.close()
        await reader_engine.dispose()
    assert await verify_differences(url) == []
