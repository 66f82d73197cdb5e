"""Helpers shared by the command modules."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from ledger.app.config import Settings
from ledger.log.errors import LedgerError

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


def settings_from(ctx: click.Context, **overrides: Any) -> Settings:
    base: dict[str, Any] = dict(ctx.obj or {})
    base.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**base)


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
