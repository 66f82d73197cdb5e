"""Helpers shared by the command modules."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError
from rich.console import Console
from sqlalchemy.exc import DBAPIError

from ledger.app.config import Settings
from ledger.app.http.validation_errors import describe_validation_error
from ledger.log.errors import LedgerError, LogDamaged, damage_of

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
err = Console(stderr=True)


def run_async(coro_fn: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine; a LedgerError becomes its message on stderr and exit status 1."""

    async def runner() -> T:
        return await coro_fn()

    try:
        return asyncio.run(runner())
    except LedgerError as exc:
        err.print(f"[red]error:[/red] {exc.message}", soft_wrap=True)  # one copyable line
        raise SystemExit(1) from exc
    except DBAPIError as exc:
        # A damaged file can fail a command's first statement (the schema is read on connect).
        damage = damage_of(exc)
        if damage is None:
            raise
        click.echo(_cannot_be_read(damage), err=True)
        raise SystemExit(1) from exc


def _cannot_be_read(reason: str) -> str:
    """The FAIL line of a store the database reports damaged."""
    return (
        f"FAIL the database cannot be read ({reason}): the store is damaged; restore a backup "
        "(docs/operations.md, 'A damaged store')"
    )


def run_check(coro_fn: Callable[[], Awaitable[T]]) -> T:
    """``run_async`` for the commands that check a store (``verify``, ``mirror verify``): what
    a damaged store makes them meet is a FAIL line and exit status 1, never a traceback."""

    async def runner() -> T:
        return await coro_fn()

    try:
        return asyncio.run(runner())
    except LogDamaged as exc:
        click.echo(f"FAIL {exc.message}")
    except DBAPIError as exc:
        reason = str(exc.orig).splitlines()[0][:300] if str(exc.orig) else type(exc.orig).__name__
        click.echo(_cannot_be_read(reason))
    except LedgerError as exc:
        err.print(f"[red]error:[/red] {exc.message}", soft_wrap=True)
    raise SystemExit(1)


def settings_from(ctx: click.Context, **overrides: Any) -> Settings:
    """The settings of the options given and the ``LEDGER_*`` environment; a value that does
    not validate is a usage error naming the setting (exit status 2), not a traceback."""
    base: dict[str, Any] = dict(ctx.obj or {})
    base.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings(**base)
    except ValidationError as exc:
        detail = describe_validation_error(exc, "settings")
        raise click.UsageError(
            f"{detail} (set by an option or its LEDGER_ variable)", ctx
        ) from None


def database_options(command: F) -> F:
    """``--data-dir`` and ``--database-url`` on every command (they also work before it)."""

    def remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None:
            ctx.ensure_object(dict)[str(param.name)] = value
        return value

    command = click.option(
        "--database-url",
        expose_value=False,
        callback=remember,
        help="SQLAlchemy URL [LEDGER_DATABASE_URL]",
    )(command)
    return click.option(
        "--data-dir",
        type=click.Path(path_type=Path),
        expose_value=False,
        callback=remember,
        help="Data directory (default ./ledger-data) [LEDGER_DATA_DIR]",
    )(command)
