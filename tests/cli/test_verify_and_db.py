"""``ledger verify`` and ``ledger db upgrade|current|check``."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from ledger.log import migrate
from ledger.log.engines import create_async_db_engine
from tests.cli.support import invoke, seed

FIRST_REVISION = "0001_events"


async def _tamper(database_url: str, statement: str, params: dict[str, object]) -> None:
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                await conn.execute(text("DROP TRIGGER events_refuse_update"))
            else:
                await conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
            await conn.execute(text(statement), params)
    finally:
        await engine.dispose()


def tamper(database_url: str, statement: str, **params: object) -> None:
    asyncio.run(_tamper(database_url, statement, params))


def test_verify_passes_on_a_good_database(database_url: str) -> None:
    seed(database_url, 9)
    result = invoke(database_url, "verify")
    assert result.exit_code == 0, result.output
    assert "ok   hash chain: 9 events" in result.stdout
    assert "ok   projections" in result.stdout


def test_verify_passes_on_an_empty_database(database_url: str) -> None:
    result = invoke(database_url, "verify")
    assert result.exit_code == 0, result.output
    assert "ok   hash chain: 0 events" in result.stdout


def test_verify_names_the_first_tampered_payload(database_url: str) -> None:
    seed(database_url, 9)
    tamper(database_url, "UPDATE events SET payload = :p WHERE seq = 5", p='{"had_rows":false}')
    result = invoke(database_url, "verify")
    assert result.exit_code == 1
    assert "FAIL hash chain: first bad seq 5: payload does not match" in result.stdout


def test_verify_names_the_first_tampered_header(database_url: str) -> None:
    seed(database_url, 9)
    tamper(database_url, "UPDATE events SET rollout_id = 'r9' WHERE seq IN (4, 7)")
    result = invoke(database_url, "verify")
    assert result.exit_code == 1
    assert "first bad seq 4: hash does not match the chain" in result.stdout


def test_verify_finds_a_deleted_event(database_url: str) -> None:
    seed(database_url, 9)
    engine_statement = "DELETE FROM events WHERE seq = 6"

    async def delete() -> None:
        engine = create_async_db_engine(database_url, null_pool=True)
        try:
            async with engine.begin() as conn:
                if conn.dialect.name == "sqlite":
                    await conn.execute(text("DROP TRIGGER events_refuse_delete"))
                else:
                    await conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
                await conn.execute(text(engine_statement))
        finally:
            await engine.dispose()

    asyncio.run(delete())
    result = invoke(database_url, "verify")
    assert result.exit_code == 1
    assert "first bad seq 7: seq 7 found where 6 was expected" in result.stdout


def test_verify_reports_a_damaged_projection(database_url: str) -> None:
    seed(database_url, 4)
    asyncio.run(_raw(database_url, "UPDATE rollouts SET generation = 7 WHERE rollout_id = 'r1'"))
    result = invoke(database_url, "verify")
    assert result.exit_code == 1
    assert "ok   hash chain: 4 events" in result.stdout
    assert "FAIL projection rollouts" in result.stdout
    skipped = invoke(database_url, "verify", "--skip-projections")
    assert skipped.exit_code == 0, skipped.output


async def _raw(database_url: str, statement: str) -> None:
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


def test_db_upgrade_current_and_check(empty_database_url: str) -> None:
    url = empty_database_url
    head = migrate.head_revision()
    assert invoke(url, "db", "current").stdout.strip() == "<empty>"
    unmigrated = invoke(url, "db", "check")
    assert unmigrated.exit_code == 1
    assert f"database is at revision <empty>, not at head {head}" in unmigrated.output

    partial = invoke(url, "db", "upgrade", FIRST_REVISION)
    assert partial.exit_code == 0, partial.output
    assert partial.stdout.strip() == f"database at {FIRST_REVISION}"
    assert invoke(url, "db", "current").stdout.strip() == FIRST_REVISION
    behind = invoke(url, "db", "check")
    assert behind.exit_code == 1
    assert f"revision {FIRST_REVISION}, not at head {head}" in behind.output
    assert "ledger db upgrade" in behind.output

    upgraded = invoke(url, "db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    assert upgraded.stdout.strip() == f"database at {head}"
    assert invoke(url, "db", "current").stdout.strip() == head
    at_head = invoke(url, "db", "check")
    assert at_head.exit_code == 0
    assert at_head.stdout.strip() == f"database at head ({head})"
    # Upgrading at head is a no-op, not an error.
    assert invoke(url, "db", "upgrade").exit_code == 0


def test_db_upgrade_to_an_unknown_revision_is_a_clear_error(empty_database_url: str) -> None:
    result = invoke(empty_database_url, "db", "upgrade", "9999_nope")
    assert result.exit_code != 0
    assert "9999_nope" in result.output
    assert "Traceback" not in result.output
