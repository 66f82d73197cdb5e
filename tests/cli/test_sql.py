"""``ledger sql`` is read-only by construction: every write is refused and changes nothing."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from ledger.log import migrate
from ledger.log.engines import is_sqlite_url, sqlite_path
from tests.cli.support import invoke, query, seed
from tests.conftest import BACKENDS
from tests.support.databases import POSTGRES_ENV, require_postgres, sqlite_url

# Refused on both backends with the read-only message.
WRITES = [
    "INSERT INTO events (seq, recorded_at, kind, schema_version, generation, payload_sha256, hash)"
    " VALUES (99, '2026-01-01', 'x', 1, 0, 'a', 'b')",
    "INSERT INTO rollouts SELECT 'zz', generation, state, first_seq, last_seq, created_at,"
    " updated_at FROM rollouts",
    "UPDATE rollouts SET state = 'retired'",
    "UPDATE events SET kind = 'forged' WHERE seq = 1",
    "DELETE FROM events",
    "DELETE FROM rollouts",
    "DROP TABLE rollouts",
    "DROP INDEX ix_events_rollout",
    "CREATE TABLE sneaky (x INTEGER)",
    "CREATE INDEX ix_sneaky ON rollouts (state)",
    "CREATE VIEW sneaky_view AS SELECT 1 AS x",
    "ALTER TABLE rollouts ADD COLUMN sneaky INTEGER",
    "WITH doomed AS (SELECT seq FROM events) DELETE FROM rollouts",
]
# Refused on SQLite with the read-only message (on PostgreSQL they are not even valid SQL).
SQLITE_WRITES = [
    "PRAGMA journal_mode=DELETE",
    "PRAGMA user_version=5",
    "PRAGMA user_version",
    "PRAGMA foreign_keys=OFF",
    "PRAGMA wal_checkpoint(TRUNCATE)",
    "ATTACH DATABASE ':memory:' AS other",
    "DETACH DATABASE main",
    "VACUUM",
    "REINDEX",
    "CREATE TEMP TABLE scratch (x INTEGER)",
    "DROP TRIGGER events_refuse_update",
    "BEGIN IMMEDIATE",
]
POSTGRES_WRITES = [
    "SELECT * FROM rollouts FOR UPDATE",
    "CREATE TEMP TABLE scratch (x INTEGER)",
    "TRUNCATE rollouts",
    "DO $$ BEGIN DELETE FROM rollouts; END $$",
    "COMMENT ON TABLE events IS 'rewritten'",
    "GRANT ALL ON events TO PUBLIC",
    "ALTER TABLE events DISABLE TRIGGER USER",
]
# Not a write, but more than one statement: refused whole (nothing of it runs).
MULTIPLE = [
    "SELECT 1; DELETE FROM rollouts",
    "DELETE FROM rollouts; SELECT 1",
    "SELECT 1; DROP TABLE rollouts;",
]


def snapshot(database_url: str) -> dict[str, object]:
    """Everything a refused statement could have changed."""
    state: dict[str, object] = {
        "events": query(database_url, "SELECT * FROM events ORDER BY seq"),
        "rollouts": query(database_url, "SELECT * FROM rollouts ORDER BY rollout_id"),
    }
    if is_sqlite_url(database_url):
        with sqlite3.connect(sqlite_path(database_url)) as conn:
            state["schema"] = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
            state["user_version"] = conn.execute("PRAGMA user_version").fetchall()
            state["journal_mode"] = conn.execute("PRAGMA journal_mode").fetchall()
        assert state["journal_mode"] == [("wal",)]
    else:
        state["schema"] = query(
            database_url,
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
        )
        state["indexes"] = query(
            database_url, "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
        )
        state["triggers"] = query(
            database_url,
            "SELECT tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1",
        )
    return state


@pytest.fixture(scope="module", params=BACKENDS)
def seeded_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One seeded database per backend for the whole module: every test here asserts that it
    changed nothing, so they can share it (and a test that did change it fails itself)."""
    if request.param == "sqlite":
        url = sqlite_url(tmp_path_factory.mktemp("sql"))
        asyncio.run(migrate.upgrade(url))
        seed(url, 6)
        yield url
        return
    require_postgres()
    admin = make_url(os.environ[POSTGRES_ENV]).set(drivername="postgresql")
    dsn = admin.render_as_string(hide_password=False)
    name = f"ledger_t_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(dsn, f'CREATE DATABASE "{name}"'))
    rendered = admin.set(drivername="postgresql+asyncpg", database=name).render_as_string(
        hide_password=False
    )
    try:
        asyncio.run(migrate.upgrade(rendered))
        seed(rendered, 6)
        yield rendered
    finally:
        asyncio.run(_admin(dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _admin(dsn: str, statement: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def assert_refused(database_url: str, statement: str, message: str) -> None:
    before = snapshot(database_url)
    result = invoke(database_url, "sql", statement)
    assert result.exit_code != 0, result.output
    assert "error:" in result.output
    assert message in result.output
    assert snapshot(database_url) == before


@pytest.mark.parametrize("statement", WRITES)
def test_writes_are_refused_and_change_nothing(seeded_url: str, statement: str) -> None:
    assert_refused(seeded_url, statement, "read-only")


@pytest.mark.parametrize("statement", SQLITE_WRITES + POSTGRES_WRITES)
def test_backend_specific_writes_are_refused(seeded_url: str, statement: str) -> None:
    sqlite = is_sqlite_url(seeded_url)
    if (statement in SQLITE_WRITES) != sqlite:
        # Not SQL of this backend: still refused, as a failed query.
        assert_refused(seeded_url, statement, "")
        return
    assert_refused(seeded_url, statement, "read-only")


@pytest.mark.parametrize("statement", MULTIPLE)
def test_multiple_statements_are_refused_whole(seeded_url: str, statement: str) -> None:
    assert_refused(seeded_url, statement, "")


def test_a_select_prints_a_table(seeded_url: str) -> None:
    result = invoke(seeded_url, "sql", "SELECT seq, kind FROM events ORDER BY seq LIMIT 2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any("seq" in line and "kind" in line for line in lines)
    assert any(" 1 " in line and "rollout.retired" in line for line in lines)
    assert any(" 2 " in line and "rollout.retired" in line for line in lines)


def test_a_select_prints_csv(seeded_url: str) -> None:
    result = invoke(
        seeded_url,
        "sql",
        "--format",
        "csv",
        "SELECT seq, kind, rollout_id FROM events WHERE seq <= 3 ORDER BY seq",
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows == [
        ["seq", "kind", "rollout_id"],
        ["1", "rollout.retired", "r0"],
        ["2", "rollout.retired", "r1"],
        ["3", "rollout.deleted", "r2"],
    ]


def test_a_select_prints_json_lines(seeded_url: str) -> None:
    result = invoke(
        seeded_url,
        "sql",
        "--format",
        "json",
        "SELECT rollout_id, generation, state FROM rollouts ORDER BY rollout_id",
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records == [
        {"rollout_id": "r0", "generation": 0, "state": "retired"},
        {"rollout_id": "r1", "generation": 1, "state": "live"},
        {"rollout_id": "r2", "generation": 1, "state": "live"},
        {"rollout_id": "r3", "generation": 0, "state": "retired"},
    ]


def test_limit_caps_the_rows(seeded_url: str) -> None:
    result = invoke(
        seeded_url, "sql", "--format", "json", "--limit", "2", "SELECT seq FROM events ORDER BY seq"
    )
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["seq"] for line in result.stdout.splitlines()] == [1, 2]


def test_a_bad_query_is_a_clear_error(seeded_url: str) -> None:
    result = invoke(seeded_url, "sql", "SELECT nope FROM nowhere")
    assert result.exit_code == 1
    assert "error: query failed" in result.output
    assert "nowhere" in result.output
