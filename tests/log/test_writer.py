"""The writer's behaviour: group commit, failure isolation, commit failures, stop, and several
writers (replicas on PostgreSQL, processes on SQLite) on one database."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, Engine, event, text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.metrics import LedgerMetrics
from ledger.log import migrate
from ledger.log.engines import create_async_db_engine, create_sqlite_writer_engine, is_sqlite_url
from ledger.log.errors import StorageUnavailable, WriterStopped
from ledger.log.events import EventType
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction
from ledger.log.verify import verify_chain, verify_projections
from ledger.log.wal_checkpoints import WalCheckpoints
from ledger.log.writer import AsyncEngineRunner, BatchRunner, SQLiteRunner, Writer
from tests.support.databases import fresh_postgres_database, require_postgres, sqlite_url


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


NOTE = EventType("test.note", Note)


def sample(metrics: LedgerMetrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name)
    assert value is not None, name
    return value


@pytest.fixture
async def metered(database_url: str) -> AsyncIterator[tuple[LedgerStore, LedgerMetrics]]:
    metrics = LedgerMetrics()
    store = LedgerStore(
        database_url, default_catalogue([NOTE]), write_side_projectors(), metrics=metrics
    )
    await store.open()
    try:
        yield store, metrics
    finally:
        await store.close()


async def assert_log_is_sound(store: LedgerStore, expected_events: int) -> None:
    async with store.read() as conn:
        chain = await verify_chain(conn)
        projections = await verify_projections(conn, store.catalogue, store.projectors)
    assert chain.ok, chain.problem
    assert chain.events == expected_events
    assert projections.ok, projections.differences


async def test_group_commit_batches_concurrent_appends(
    metered: tuple[LedgerStore, LedgerMetrics],
) -> None:
    store, metrics = metered
    appended = await asyncio.gather(
        *(store.append(NewEvent("test.note", {"text": str(n)}, f"r{n % 8}")) for n in range(64))
    )
    assert sorted(a.event.seq for a in appended) == list(range(1, 65))
    batches = sample(metrics, "ledger_writer_batch_size_count")
    assert sample(metrics, "ledger_writer_batch_size_sum") == 64
    assert sample(metrics, "ledger_events_appended_total") == 64
    assert batches < 64, "one commit must serve several appends"
    await assert_log_is_sound(store, 64)


async def test_a_failing_command_fails_only_itself(
    metered: tuple[LedgerStore, LedgerMetrics],
) -> None:
    store, metrics = metered

    def fails_after_appending(tx: WriteTransaction) -> None:
        tx.append("test.note", {"text": "never kept"}, rollout_id="doomed")
        raise ValueError("the command changed its mind")

    def appends(text: str) -> Any:
        def command(tx: WriteTransaction) -> int:
            return tx.append("test.note", {"text": text}, rollout_id="kept").event.seq

        return command

    results = await asyncio.gather(
        store.execute(appends("a")),
        store.execute(fails_after_appending),
        store.execute(appends("b")),
        store.execute(fails_after_appending),
        store.execute(appends("c")),
        return_exceptions=True,
    )
    assert results[0] == 1 and results[2] == 2 and results[4] == 3
    assert isinstance(results[1], ValueError) and isinstance(results[3], ValueError)
    assert [e.payload for e in await store.events()] == [
        {"text": "a"},
        {"text": "b"},
        {"text": "c"},
    ]
    assert await store.rollout("doomed") is None
    assert sample(metrics, "ledger_writer_failed_batches_total") == 0
    assert sample(metrics, "ledger_writer_batch_size_sum") == 5
    await assert_log_is_sound(store, 3)


@contextmanager
def failing_commits(engine: Engine) -> Iterator[list[int]]:
    """Every COMMIT on ``engine`` fails while inside the block; yields the failure count."""
    failures: list[int] = []

    def refuse(conn: Connection) -> None:
        failures.append(1)
        raise RuntimeError("injected commit failure")

    event.listen(engine, "commit", refuse)
    try:
        yield failures
    finally:
        event.remove(engine, "commit", refuse)


def writer_parts(database_url: str) -> tuple[BatchRunner, Engine]:
    if is_sqlite_url(database_url):
        engine = create_sqlite_writer_engine(database_url, synchronous="FULL", busy_timeout_ms=5000)
        return SQLiteRunner(engine, checkpoints=WalCheckpoints()), engine
    async_engine = create_async_db_engine(database_url, pool_size=1)
    return AsyncEngineRunner(async_engine), async_engine.sync_engine


async def test_a_commit_failure_fails_the_whole_batch_and_the_writer_goes_on(
    database_url: str,
) -> None:
    runner, engine = writer_parts(database_url)
    metrics = LedgerMetrics()
    catalogue = default_catalogue([NOTE])
    writer = Writer(
        runner,
        catalogue,
        write_side_projectors(),
        advisory_lock=not is_sqlite_url(database_url),
        max_batch=512,
        max_batch_bytes=1 << 20,
        metrics=metrics,
    )
    reader = LedgerStore(database_url, catalogue, write_side_projectors())

    def append(text: str) -> Any:
        def command(tx: WriteTransaction) -> int:
            return tx.append("test.note", {"text": text}, rollout_id="r1").event.seq

        return command

    await writer.start()
    try:
        assert await writer.execute(append("before")) == 1

        def retire_r2(tx: WriteTransaction) -> None:
            tx.append(ROLLOUT_RETIRED, {}, rollout_id="r2")

        with failing_commits(engine) as failures:
            results = await asyncio.gather(
                *(writer.execute(append(f"lost {n}")) for n in range(8)),
                writer.execute(retire_r2),
                return_exceptions=True,
            )
        assert all(isinstance(r, RuntimeError) for r in results), results
        assert all("injected commit failure" in str(r) for r in results)
        assert failures and sample(metrics, "ledger_writer_failed_batches_total") == len(failures)
        # The writer still runs, and the failed batch left no trace: seq 2 is reused, and the
        # retirement that was never committed is not remembered either.
        assert await writer.execute(lambda tx: tx.rollout("r2")) is None
        assert await writer.execute(append("after")) == 2
        assert await writer.execute(append("after again")) == 3
        stored = await reader.events()
        assert [e.payload for e in stored] == [
            {"text": "before"},
            {"text": "after"},
            {"text": "after again"},
        ]
        await assert_log_is_sound(reader, 3)
    finally:
        await writer.stop()
        await reader.close()


async def test_execute_after_stop_raises_writer_stopped(database_url: str) -> None:
    store = LedgerStore(database_url, default_catalogue([NOTE]), write_side_projectors())
    with pytest.raises(WriterStopped):
        await store.append(NewEvent("test.note", {"text": "not started"}))
    await store.open()
    await store.append(NewEvent("test.note", {"text": "running"}))
    await store.close()
    with pytest.raises(WriterStopped, match="not running"):
        await store.append(NewEvent("test.note", {"text": "stopped"}))
    with pytest.raises(WriterStopped):
        await store.execute(lambda tx: None)


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    require_postgres()
    async with fresh_postgres_database() as url:
        await migrate.upgrade(url)
        yield url


@pytest.mark.postgres
async def test_two_replicas_append_concurrently_with_a_gapless_chain(postgres_url: str) -> None:
    database_url = postgres_url
    catalogue = default_catalogue([NOTE])
    replicas = [LedgerStore(database_url, catalogue, write_side_projectors()) for _ in range(2)]
    reader = LedgerStore(database_url, catalogue, write_side_projectors())
    for replica in replicas:
        await replica.open()
    per_replica, appenders, each = 2, 6, 20
    total = per_replica * appenders * each
    pages: list[list[int]] = []

    async def appender(store: LedgerStore, name: str) -> list[int]:
        seqs = []
        for n in range(each):
            appended = await store.append(NewEvent("test.note", {"text": f"{name}-{n}"}, name))
            seqs.append(appended.event.seq)
        return seqs

    async def tail() -> None:
        cursor = 0
        while cursor < total:
            page = [e.seq for e in await reader.events(after=cursor, limit=1000)]
            # Never a later seq before an earlier one: every page continues the cursor exactly.
            assert page == list(range(cursor + 1, cursor + 1 + len(page))), (cursor, page)
            if page:
                pages.append(page)
                cursor = page[-1]
            await asyncio.sleep(0)  # poll: let the appenders run between pages

    try:
        tailing = asyncio.create_task(tail())
        results = await asyncio.gather(
            *(
                appender(replica, f"p{index}-w{worker}")
                for index, replica in enumerate(replicas)
                for worker in range(appenders)
            )
        )
        await asyncio.wait_for(tailing, timeout=60)
    finally:
        for replica in replicas:
            await replica.close()
    try:
        assert sorted(seq for seqs in results for seq in seqs) == list(range(1, total + 1))
        assert [seq for page in pages for seq in page] == list(range(1, total + 1))
        assert len(pages) > 1, "the reader tailed while the writers ran"
        await assert_log_is_sound(reader, total)
    finally:
        await reader.close()


APPENDER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from ledger.app.areas import default_catalogue
    from ledger.log.rollout_events import ROLLOUT_RETIRED
    from ledger.app.areas import write_side_projectors
    from ledger.log.records import NewEvent
    from ledger.log.store import LedgerStore

    async def main(url: str, name: str, count: int, rendezvous: Path) -> None:
        store = LedgerStore(url, default_catalogue(), write_side_projectors())
        await store.open()
        try:
            # Start appending only when both processes are ready, so they really overlap.
            (rendezvous / f"ready-{name}").touch()
            deadline = time.monotonic() + 60
            while not (rendezvous / "go").exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # poll
            async def worker(w: int) -> None:
                for n in range(w, count, 4):
                    await store.append(NewEvent(ROLLOUT_RETIRED, {}, f"{name}-{n}"))
                    # Pace the appends so the write lock changes hands many times.
                    await asyncio.sleep(0.002)  # poll: a deliberate pause (pacing)
            await asyncio.gather(*(worker(w) for w in range(4)))
        finally:
            await store.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])))
    """
)


@pytest.mark.slow
async def test_two_processes_append_to_one_sqlite_file(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    await migrate.upgrade(url)
    each, names = 150, ("proc-a", "proc-b")
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            APPENDER_SCRIPT,
            url,
            name,
            str(each),
            str(tmp_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        for name in names
    ]
    try:
        async with asyncio.timeout(60):
            while not all((tmp_path / f"ready-{name}").exists() for name in names):
                for process in processes:
                    assert process.returncode is None, "an appender exited before starting"
                await asyncio.sleep(0.01)  # poll
        (tmp_path / "go").touch()
        for process in processes:
            output, _ = await asyncio.wait_for(process.communicate(), timeout=120)
            assert process.returncode == 0, output.decode()
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    try:
        stored = await store.events(limit=10 * each)
        assert [e.seq for e in stored] == list(range(1, 2 * each + 1))
        for name in names:
            ids = {e.rollout_id for e in stored if e.rollout_id and e.rollout_id.startswith(name)}
            assert ids == {f"{name}-{n}" for n in range(each)}
        await assert_log_is_sound(store, 2 * each)
    finally:
        await store.close()


async def test_a_command_whose_sql_fails_fails_only_itself(
    metered: tuple[LedgerStore, LedgerMetrics],
) -> None:
    store, _metrics = metered

    def duplicate_seq(tx: WriteTransaction) -> None:
        tx.append("test.note", {"text": "kept only if the batch survives"}, rollout_id="r2")
        # A raw insert that collides with seq 1: the database refuses it (on PostgreSQL this
        # aborts the transaction until the savepoint is rolled back).
        tx.conn.execute(
            text(
                "INSERT INTO events (seq, recorded_at, kind, schema_version, generation, "
                "payload_sha256, hash) VALUES (1, :at, 'x', 1, 0, 'a', 'b')"
            ),
            {"at": datetime.now(UTC)},
        )

    first = await store.append(NewEvent("test.note", {"text": "one"}, "r1"))
    results = await asyncio.gather(
        store.execute(duplicate_seq),
        store.append(NewEvent("test.note", {"text": "two"}, "r1")),
        return_exceptions=True,
    )
    assert isinstance(results[0], StorageUnavailable), results
    assert not isinstance(results[1], BaseException)
    assert (first.event.seq, results[1].event.seq) == (1, 2)
    assert await store.rollout("r2") is None
    await assert_log_is_sound(store, 2)


async def test_state_read_in_a_command_follows_its_own_appends(
    metered: tuple[LedgerStore, LedgerMetrics],
) -> None:
    store, _metrics = metered

    def lifecycle(tx: WriteTransaction) -> list[tuple[str, int] | None]:
        seen: list[tuple[str, int] | None] = []

        def note() -> None:
            state = tx.rollout("r1")
            seen.append(None if state is None else (state.state, state.generation))

        note()
        tx.append("test.note", {"text": "a"}, rollout_id="r1")
        note()
        tx.append(ROLLOUT_RETIRED, {}, rollout_id="r1")
        note()
        tx.append(ROLLOUT_DELETED, {}, rollout_id="r1")
        note()
        assert tx.generation_of("r1") == 1
        tx.append("test.note", {"text": "b"}, rollout_id="r1")
        note()
        return seen

    seen = await store.execute(lifecycle)
    assert seen == [None, ("live", 0), ("retired", 0), ("live", 1), ("live", 1)]
    stored = await store.rollout("r1")
    assert stored is not None
    assert await store.execute(lambda tx: tx.rollout("r1")) == stored
    assert (stored.first_seq, stored.last_seq) == (1, 4)
    await assert_log_is_sound(store, 4)


async def test_a_rolled_back_command_leaves_no_state_behind(
    metered: tuple[LedgerStore, LedgerMetrics],
) -> None:
    store, _metrics = metered
    await store.append(NewEvent("test.note", {"text": "a"}, "r1"))

    def delete_then_fail(tx: WriteTransaction) -> None:
        tx.append(ROLLOUT_DELETED, {}, rollout_id="r1")
        assert tx.generation_of("r1") == 1
        raise ValueError("changed its mind")

    results = await asyncio.gather(
        store.execute(delete_then_fail),
        store.execute(lambda tx: tx.generation_of("r1")),
        store.execute(lambda tx: tx.append("test.note", {"text": "b"}, rollout_id="r1")),
        return_exceptions=True,
    )
    assert isinstance(results[0], ValueError)
    assert results[1] == 0
    assert not isinstance(results[2], BaseException) and results[2].event.generation == 0
    await assert_log_is_sound(store, 2)


async def test_state_appended_by_another_writer_is_seen(database_url: str) -> None:
    """Two writers on one database (replicas, or processes on one SQLite file): what one
    appended is what the other decides on next."""
    catalogue = default_catalogue([NOTE])
    first = LedgerStore(database_url, catalogue, write_side_projectors())
    second = LedgerStore(database_url, catalogue, write_side_projectors())
    await first.open()
    await second.open()
    try:
        await first.append(NewEvent("test.note", {"text": "a"}, "r1"))
        assert await first.execute(lambda tx: tx.generation_of("r1")) == 0
        await second.append(NewEvent(ROLLOUT_DELETED, {}, "r1"))
        assert await first.execute(lambda tx: tx.generation_of("r1")) == 1
        appended = await first.append(NewEvent("test.note", {"text": "b"}, "r1"))
        assert (appended.event.seq, appended.event.generation) == (3, 1)
        await second.append(NewEvent(ROLLOUT_RETIRED, {}, "r1"))
        state = await first.execute(lambda tx: tx.rollout("r1"))
        assert state is not None and (state.state, state.generation, state.last_seq) == (
            "retired",
            1,
            4,
        )
        await assert_log_is_sound(first, 4)
    finally:
        await first.close()
        await second.close()
