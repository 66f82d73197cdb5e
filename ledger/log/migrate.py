"""Programmatic alembic: upgrade, downgrade, current revision, and the at-head check."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection

from ledger.log.engines import create_async_db_engine, is_sqlite_url, sqlite_path
from ledger.log.errors import DatabaseNotAtHead, InvalidRevision
from ledger.log.private_files import create_private_file

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # alembic's config is an INI file underneath: '%' must be doubled.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


def _ensure_sqlite_parent(url: str) -> None:
    if is_sqlite_url(url) and sqlite_path(url) not in ("", ":memory:"):
        create_private_file(Path(sqlite_path(url)))


async def _with_connection(url: str, config: Config, action: str, revision: str) -> None:
    _ensure_sqlite_parent(url)
    engine = create_async_db_engine(url, null_pool=True)

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
            return await connection.run_sync(
                lambda sync: MigrationContext.configure(sync).get_current_revision()
            )
    finally:
        await engine.dispose()


async def ensure_at_head(url: str) -> None:
    current = await current_revision(url)
    head = head_revision()
    if current != head:
        raise DatabaseNotAtHead(
            f"database is at revision {current or '<empty>'}, not at head {head}; "
            "run `ledger db upgrade`"
        )
