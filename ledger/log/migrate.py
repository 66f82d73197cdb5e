"""Programmatic alembic: upgrade, downgrade, current revision, and the at-head check.

alembic is imported only to migrate. The at-head check that ``ledger serve`` and ``/readyz`` run
reads the version table with plain SQL against the revision this code is written for: importing
alembic (and mako, and pygments through it) was about a sixth of every server start's imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.engines import create_async_db_engine, is_sqlite_url, sqlite_path
from ledger.log.errors import DatabaseNotAtHead, InvalidRevision
from ledger.log.private_files import create_private_file

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
# The newest revision in migrations/versions: the schema this code reads and writes.
# tests/migrations checks that it is alembic's head, so a new revision cannot forget it.
HEAD_REVISION = "0023_retired_builds"
VERSION_TABLE = "alembic_version"


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # alembic's config is an INI file underneath: '%' must be doubled.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str:
    return HEAD_REVISION


def alembic_head() -> str:
    """The head of the migration scripts, as alembic computes it."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


def _ensure_sqlite_parent(url: str) -> None:
    if is_sqlite_url(url) and sqlite_path(url) not in ("", ":memory:"):
        create_private_file(Path(sqlite_path(url)))


async def _with_connection(url: str, config: Config, action: str, revision: str) -> None:
    _ensure_sqlite_parent(url)
    engine = create_async_db_engine(url, null_pool=True)

    from alembic import command
    from alembic.util.exc import CommandError

    def run(connection: Connection) -> None:
        config.attributes["connection"] = connection
        try:
            if action == "upgrade":
                command.upgrade(config, revision)
            else:
                command.downgrade(config, revision)
        except CommandError as exc:
            # e.g. an unknown revision id: an operator's typo, not a crash with a traceback.
            raise InvalidRevision(f"cannot {action} to {revision!r}: {exc}") from exc

    try:
        async with engine.begin() as connection:
            await connection.run_sync(run)
    finally:
        await engine.dispose()


async def upgrade(url: str, revision: str = "head") -> None:
    await _with_connection(url, alembic_config(url), "upgrade", revision)


async def downgrade(url: str, revision: str) -> None:
    await _with_connection(url, alembic_config(url), "downgrade", revision)


async def current_revision(url: str) -> str | None:
    _ensure_sqlite_parent(url)
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_stored_revision)
    finally:
        await engine.dispose()


def _stored_revision(connection: Connection) -> str | None:
    """What alembic's ``MigrationContext.get_current_revision`` answers, for our one branch."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    revisions = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars()
    found = sorted(revisions)
    if len(found) > 1:  # never made by this chain; not at head whatever it names
        return ",".join(found)
    return found[0] if found else None


async def ensure_at_head(url: str) -> None:
    check_at_head(await current_revision(url))


async def ensure_connection_at_head(conn: AsyncConnection) -> None:
    """``ensure_at_head`` on a connection already open (a running server's reader)."""
    check_at_head(await conn.run_sync(_stored_revision))


def check_at_head(current: str | None) -> None:
    head = head_revision()
    if current != head:
        raise DatabaseNotAtHead(
            f"database is at revision {current or '<empty>'}, not at head {head}; "
            "run `ledger db upgrade`"
        )
