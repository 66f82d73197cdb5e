"""Commands of the lineage area: ``manifest``, ``retire``, ``delete`` (through the control API,
like a trainer) and ``control hold|release|status`` (the removal hold, written to the database)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from ledger.app.bootstrap import control_token_path, opened_store
from ledger.app.cli.common import database_options, err, run_async, settings_from
from ledger.app.config import Settings
from ledger.areas.lineage.client import RolloutControlClient
from ledger.areas.lineage.service import LineageService
from ledger.log.errors import RolloutRetiredError

T = TypeVar("T")


def _control_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--timeout",
        type=float,
        default=30.0,
        show_default=True,
        help="Seconds per request",
    )(command)
    command = click.option(
        "--token",
        envvar="LEDGER_CONTROL_TOKEN",
        help="Control bearer token [LEDGER_CONTROL_TOKEN] (default: <data-dir>/control-token)",
    )(command)
    command = click.option(
        "--url",
        envvar="LEDGER_URL",
        help="Base URL of the ledger [LEDGER_URL] (default: http://<host>:<port> from settings)",
    )(command)
    return database_options(command)


def _client(settings: Settings, url: str | None, token: str | None, timeout: float) -> Any:
    if token is None:
        if settings.control_token is not None:
            token = settings.control_token.get_secret_value()
        else:
            path = control_token_path(settings)
            try:
                token = path.read_text().strip()
            except OSError as exc:
                raise click.ClickException(
                    f"no control token: pass --token, set LEDGER_CONTROL_TOKEN, or create {path}"
                ) from exc
    base_url = url or f"http://{settings.host}:{settings.port}"
    try:
        return RolloutControlClient(base_url, token, timeout)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc


def _ids(values: tuple[str, ...]) -> list[str]:
    """The ids given, where ``-`` stands for one id per line on stdin."""
    ids: list[str] = []
    for value in values:
        if value == "-":
            ids.extend(line.strip() for line in sys.stdin if line.strip())
        else:
            ids.append(value)
    return ids


def _call(action: Callable[[], Awaitable[T]]) -> T:
    try:
        return asyncio.run(_awaited(action))
    except RolloutRetiredError as exc:
        err.print(f"[red]gone:[/red] {exc.message}")
        raise SystemExit(3) from exc
    except (RuntimeError, ValueError, TypeError) as exc:
        raise click.ClickException(str(exc)) from exc


async def _awaited(action: Callable[[], Awaitable[T]]) -> T:
    return await action()


@click.command()
@click.argument("rollout_id")
@_control_options
@click.pass_context
def manifest(
    ctx: click.Context, rollout_id: str, url: str | None, token: str | None, timeout: float
) -> None:
    """Print a rollout's manifest as JSON (exit 3 if the rollout is retired)."""
    client = _client(settings_from(ctx), url, token, timeout)
    result = _call(lambda: client.manifest(rollout_id))
    click.echo(json.dumps(result.model_dump(mode="json")))


def _removal_command(action: str, help_text: str) -> click.Command:
    @click.command(action, help=help_text)
    @click.argument("rollout_ids", nargs=-1, required=True)
    @_control_options
    @click.pass_context
    def command(
        ctx: click.Context,
        rollout_ids: tuple[str, ...],
        url: str | None,
        token: str | None,
        timeout: float,
    ) -> None:
        client = _client(settings_from(ctx), url, token, timeout)
        ids = _ids(rollout_ids)
        method = client.retire if action == "retire" else client.delete
        result = _call(lambda: method(ids))
        click.echo(json.dumps(result.model_dump(mode="json")))

    return command


retire = _removal_command(
    "retire",
    "Fence rollouts (their manifests then answer 410; late rows are discarded). "
    "Give ids as arguments, or - to read one per line from stdin.",
)
delete = _removal_command(
    "delete",
    "Remove rollouts' ledgers and fences; the ids become reusable. "
    "Give ids as arguments, or - to read one per line from stdin.",
)


@click.group()
def control() -> None:
    """The removal hold: refuse retire/delete for a while (e.g. while a checkpoint is open)."""


async def _with_service(settings: Settings, fn: Callable[[LineageService], Awaitable[T]]) -> T:
    async with opened_store(settings) as store:
        return await fn(LineageService(store))


@control.command("hold")
@click.option("--reason", required=True, help="Told to every refused retire/delete (409)")
@database_options
@click.pass_context
def hold(ctx: click.Context, reason: str) -> None:
    """Refuse every retire and delete, on every server sharing the database, until released."""
    if not reason.strip():
        raise click.BadParameter("the reason must not be empty", param_hint="--reason")
    settings = settings_from(ctx)
    changed = run_async(lambda: _with_service(settings, lambda s: s.hold(reason)))
    click.echo("removal hold set" if changed else "removal hold already set with that reason")


@control.command("release")
@database_options
@click.pass_context
def release(ctx: click.Context) -> None:
    """Allow retire and delete again."""
    settings = settings_from(ctx)
    changed = run_async(lambda: _with_service(settings, lambda s: s.release()))
    click.echo("removal hold released" if changed else "no removal hold was set")


@control.command("status")
@database_options
@click.pass_context
def status(ctx: click.Context) -> None:
    """Print the removal hold, if any (exit 0 either way)."""
    settings = settings_from(ctx)
    current = run_async(lambda: _with_service(settings, lambda s: s.hold_status()))
    if current is None:
        click.echo("no removal hold")
    else:
        click.echo(
            f"removal hold since {current.set_at.isoformat()} (seq {current.set_seq}): "
            f"{current.reason}"
        )


def register(main: click.Group) -> None:
    """Add this area's commands to ``main``."""
    for command in (manifest, retire, delete, control):
        main.add_command(command)
