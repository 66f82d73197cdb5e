"""Alembic environment: async, batch mode on SQLite, uses a connection passed in when present."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection

from ledger.app.areas import migrated_schema
from ledger.log.engines import create_async_db_engine

config = context.config


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=migrated_schema(),
        # SQLite cannot ALTER most things in place; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL given to the migrations")
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_configure_and_run)
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=migrated_schema(),
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
    else:
        asyncio.run(_run_async())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
