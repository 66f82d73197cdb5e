"""The replay ``ledger verify`` rebuilds projections with: page at a time (``apply_many``, one
flush per page) gives exactly the rows of the writer's order (one ``apply`` per event and
projector), its decoding is ``row_to_event``'s, and verify still reports a damaged row of any
projection table of a varied log."""

from __future__ import annotations

import re
import sqlite3
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Table, select, text

import ledger.areas.observations.projection as observations_projection
from ledger.app.areas import (
    default_catalogue,
    default_projectors,
    view_projectors,
    write_side_projectors,
)
from ledger.areas.captures.derivation import derive_call
from ledger.areas.captures.events import MODEL_CALL_CAPTURED
from ledger.log.engines import create_async_db_engine
from ledger.log.projector import AppliesMany, Projector
from ledger.log.replay import EventDecoder, Replay, scratch_database
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from ledger.log.transaction import row_to_event
from ledger.log.verify import ChecksAtEnd, verify_projections
from ledger.log.view_builds import FIRST_BUILD, table_name
from tests.log.record_builds import count_record_builds
from tests.support.databases import drop_postgres_database, postgres_url, run_on_own_loop
from tests.support.templates import PostgresCopies, copy_sqlite_template, new_postgres_copy
from tests.support.varied_log import LogShape, write_varied_log

# 14 rollouts reach every branch of the varied log (clears, pending calls, incomplete markers,
# retires with a late row, a delete and a second generation); small batches and pages make
# commands and pages end everywhere.
SHAPE = LogShape(rollouts=14, calls=8, batch=3, padding=40)
PAGE = 7


async def _write_varied(url: str) -> None:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        await write_varied_log(store, SHAPE)
    finally:
        await store.close()


# The varied log is written once per backend and module (2-4 s each), into a database at head;
# every test gets a copy of it (tests/support/templates.py: its own epoch), as it got a fresh
# database before. The same SHAPE always gives the same events, but for their timestamps.
@pytest.fixture(scope="module")
def varied_sqlite(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("varied-sqlite")
    url = copy_sqlite_template(sqlite_template, directory)
    run_on_own_loop(_write_varied(url))
    path = directory / "ledger.db"
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path


@pytest.fixture(scope="module")
def varied_postgres(postgres_copies: PostgresCopies) -> Iterator[PostgresCopies]:
    name = run_on_own_loop(new_postgres_copy(postgres_copies.template))
    try:
        run_on_own_loop(_write_varied(postgres_url(name)))
        with PostgresCopies(name) as copies:
            yield copies
    finally:
        run_on_own_loop(drop_postgres_database(name))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """This module's databases: each a fresh copy of the varied log, on each backend."""
    if request.param == "sqlite":
        yield copy_sqlite_template(request.getfixturevalue("varied_sqlite"), tmp_path)
        return
    copies: PostgresCopies = request.getfixturevalue("varied_postgres")
    async with copies.url() as url:
        yield url


@pytest.fixture
async def varied(store: LedgerStore) -> LedgerStore:
    """The store, on a copy of the varied log."""
    return store


def _rows(conn: Connection, table: Table) -> list[tuple[Any, ...]]:
    key = list(table.primary_key.columns) or list(table.columns)
    return [tuple(row) for row in conn.execute(select(table).order_by(*key))]


def _replayed(
    stored: list[Any], projectors: list[Projector], *, per_event: bool, page: int
) -> dict[str, list[tuple[Any, ...]]]:
    tables = [table for projector in projectors for table in projector.tables]
    with (
        tempfile.TemporaryDirectory() as directory,
        scratch_database(Path(directory), tables) as scratch,
        scratch.begin() as conn,
    ):
        for projector in projectors:
            if isinstance(projector, ChecksAtEnd):
                projector.defer_checks()
        replay = Replay(
            conn, default_catalogue(), projectors, per_event=per_event, copy_events=True
        )
        for start in range(0, len(stored), page):
            replay.apply_page(stored[start : start + page])
        for projector in projectors:
            if isinstance(projector, ChecksAtEnd):
                projector.check_at_end(conn)
        assert replay.events == len(stored)
        return {table.name: _rows(conn, table) for table in tables}


async def _stored_rows(store: LedgerStore) -> list[Any]:
    async with store.read() as conn:
        return list((await conn.execute(select(events).order_by(events.c.seq))).all())


async def test_a_page_at_a_time_gives_the_rows_of_one_event_at_a_time(
    varied: LedgerStore,
) -> None:
    stored = await _stored_rows(varied)
    assert {row.kind for row in stored} >= {
        "model_call.captured",
        "capture.cleared",
        "capture.pending_announced",
        "capture.pending_withdrawn",
        "capture.marked_incomplete",
        "ledger.row_recorded",
        "ledger.failure_recorded",
        "ledger.row_discarded",
        "observations.recorded",
        "rollout.result_recorded",
        "rollout.retired",
        "rollout.deleted",
    }
    projectors = default_projectors(check_templates=True)
    assert any(isinstance(p, AppliesMany) for p in projectors)
    reference = _replayed(stored, default_projectors(check_templates=True), per_event=True, page=1)
    assert all(reference[name] for name in ("capture_calls", "lineage_rows", "rollouts"))
    for page in (PAGE, 2000):
        paged = _replayed(
            stored, default_projectors(check_templates=True), per_event=False, page=page
        )
        assert paged.keys() == reference.keys()
        for name, rows in reference.items():
            assert paged[name] == rows, f"{name} differs with pages of {page}"


async def test_the_decoder_gives_row_to_event_with_the_capture_derived(
    varied: LedgerStore,
) -> None:
    catalogue = default_catalogue()
    decode = EventDecoder(catalogue)
    derived = 0
    for row in await _stored_rows(varied):
        event = decode(row)
        assert event == row_to_event(row, catalogue)
        if row.kind == MODEL_CALL_CAPTURED:
            assert event.payload is not None
            assert event.derived == derive_call(event.payload["exchange"])
            derived += 1
        else:
            assert event.derived is None
    assert derived > 0


async def test_verify_of_the_varied_log_passes_in_both_orders(
    varied: LedgerStore, database_url: str
) -> None:
    engine = create_async_db_engine(database_url, read_only=True, null_pool=True)
    try:
        for per_event in (False, True):
            report = await verify_projections(
                engine,
                default_catalogue(),
                default_projectors(check_templates=True),
                batch=PAGE,
                per_event=per_event,
            )
            assert report.ok, report.differences
            assert report.events == await varied.head_seq()
    finally:
        await engine.dispose()


VIEW_TABLES = {table.name for view in view_projectors() for table in view.tables}
DAMAGE = [
    ("capture_calls", "UPDATE capture_calls SET tokens_in = 999 WHERE call_index = 2"),
    ("capture_calls", "DELETE FROM capture_calls WHERE call_index = 1 AND rollout_id = 'varied-0'"),
    ("capture_state", "UPDATE capture_state SET next_call_index = next_call_index + 1"),
    ("capture_positions", "UPDATE capture_positions SET seq = seq + 1000 WHERE call_index = 1"),
    ("capture_call_counts", "UPDATE capture_call_counts SET damaged_count = damaged_count + 1"),
    ("lineage_rows", "UPDATE lineage_rows SET cum_len = 7 WHERE rollout_id = 'varied-2'"),
    ("lineage_discarded", "DELETE FROM lineage_discarded"),
    (
        "observation_calls",
        "UPDATE observation_calls SET trajectory_entry = "
        'REPLACE(trajectory_entry, \'"model_call_id":"\', \'"model_call_id":"x\') '
        "WHERE call_index = 3",
    ),
    ("observation_records", "UPDATE observation_records SET resolved = NOT resolved"),
    ("observation_tool_calls", "DELETE FROM observation_tool_calls WHERE position = 0"),
    ("observation_gaps", "UPDATE observation_gaps SET code = 'other'"),
    ("rollouts", "UPDATE rollouts SET state = 'live' WHERE rollout_id = 'varied-3'"),
]


@pytest.mark.parametrize(
    ("table", "statement"), DAMAGE, ids=[d[0] + str(i) for i, d in enumerate(DAMAGE)]
)
async def test_verify_names_a_damaged_table_of_the_varied_log(
    varied: LedgerStore, database_url: str, table: str, statement: str
) -> None:
    if table in VIEW_TABLES:
        # The views' rows are in their live build's tables, the first in a new database (the
        # stable name is a SQL view over it: log/view_builds.py).
        statement = re.sub(rf"\b{table}\b", table_name(table, FIRST_BUILD), statement)
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            changed = (await conn.execute(text(statement))).rowcount
        assert changed > 0, statement
        report = await verify_projections(
            engine, default_catalogue(), default_projectors(check_templates=True), batch=PAGE
        )
    finally:
        await engine.dispose()
    assert not report.ok
    assert [d.split(":")[0] for d in report.differences] == [table], report.differences


async def test_each_rollouts_record_is_built_once_whatever_the_page(
    varied: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of 7 events end inside every rollout: built at each flush, a rollout's record was
    # built once per page it spans. The replay builds it once, from its final inputs.
    built = count_record_builds(monkeypatch)
    async with varied.read() as conn:
        report = await verify_projections(
            conn, default_catalogue(), default_projectors(check_templates=True), batch=PAGE
        )
    assert report.ok, report.differences
    assert built and set(Counter(built).values()) == {1}


async def test_records_written_early_past_the_bound_still_verify(
    varied: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At most one record deferred: the others are written as soon as another rollout is
    # touched, and built again when touched later (the path of logs with many open rollouts).
    monkeypatch.setattr(observations_projection, "DEFERRED_RECORDS", 1)
    async with varied.read() as conn:
        report = await verify_projections(
            conn, default_catalogue(), default_projectors(check_templates=True), batch=PAGE
        )
    assert report.ok, report.differences
    assert report.events == await varied.head_seq()
