"""Core commands: serve, db, verify, events, sql."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import logging
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ledger.app.areas import default_catalogue
from ledger.app.cli.common import (
    F,
    database_options,
    err,
    run_async,
    run_check,
    settings_from,
)
from ledger.app.config import Settings
from ledger.areas.proxy.cli import upstream_options
from ledger.log import migrate
from ledger.log.adhoc import run_readonly_query
from ledger.log.errors import LedgerError
from ledger.log.queries import read_events
from ledger.log.rebuild import RebuildReport


def skip_integrity_check_option(command: F) -> F:
    """``--skip-integrity-check`` (serve, db check): the page check is the slow part."""
    return click.option(
        "--skip-integrity-check",
        "integrity_check",
        flag_value=False,
        default=None,
        help="Skip SQLite's PRAGMA quick_check at start (very large stores; docs/operations.md)",
    )(command)


@click.command()
@click.option("--host", help="Bind address (default 127.0.0.1) [LEDGER_HOST]")
@click.option("--port", type=int, help="Port (default 8420) [LEDGER_PORT]")
@click.option(
    "--insecure", is_flag=True, default=None, help="Allow a non-loopback bind without tokens"
)
@click.option("--log-level", default="info", show_default=True)
@click.option("--upgrade", is_flag=True, help="Upgrade the database to head before serving")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes on the port, each with its own writer (docs/operations.md)",
)
@click.option(
    "--follow-capture-dir",
    "follow_capture_dirs",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Follow a live Gym capture dir (repeatable) [LEDGER_FOLLOW_CAPTURE_DIRS, JSON list]",
)
@click.option(
    "--follow-poll",
    "follow_force_polling",
    is_flag=True,
    default=None,
    help="Poll followed dirs instead of inotify (network filesystems)",
)
@click.option(
    "--read-only",
    is_flag=True,
    default=None,
    help="Serve reads only, even from a store the start-up check refuses [LEDGER_READ_ONLY]",
)
@click.option(
    "--otlp-endpoint",
    metavar="URL",
    help="Send rollouts as OTLP traces to this collector as they change (docs/otel.md) "
    "[LEDGER_OTLP_ENDPOINT; headers from LEDGER_OTLP_HEADERS]",
)
@click.option(
    "--otlp-content",
    is_flag=True,
    default=None,
    help="With --otlp-endpoint: include requests, responses and tool outputs",
)
@skip_integrity_check_option
@database_options
@upstream_options
@click.pass_context
def serve(
    ctx: click.Context,
    host: str | None,
    port: int | None,
    insecure: bool | None,
    log_level: str,
    upgrade: bool,
    workers: int,
    follow_capture_dirs: tuple[Path, ...],
    follow_force_polling: bool | None,
    read_only: bool | None,
    otlp_endpoint: str | None,
    otlp_content: bool | None,
    integrity_check: bool | None,
) -> None:
    """Run the HTTP service (the database must be at the head revision and pass the start-up
    check: docs/operations.md, "A damaged store")."""
    import uvicorn

    from ledger.app.bootstrap import (
        control_token_path,
        ensure_control_token,
        ensure_database_ready,
        upgrade_with_settings,
    )
    from ledger.app.http.app import create_app
    from ledger.app.http.server import uvicorn_options
    from ledger.log.collection import settle_server_process

    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = settings_from(
        ctx,
        host=host,
        port=port,
        insecure=insecure,
        follow_capture_dirs=list(follow_capture_dirs) or None,
        follow_force_polling=follow_force_polling,
        read_only=read_only,
        integrity_check=integrity_check,
        otlp_endpoint=otlp_endpoint,
        otlp_content=otlp_content,
    )
    if settings.otlp_endpoint is not None:
        if workers > 1:
            # One exporter per store: N workers would each send every rollout and race on the
            # one checkpoint.
            raise click.UsageError("--otlp-endpoint needs --workers 1")
        from ledger.areas.otel.sender import headers_from_environment

        try:
            headers_from_environment()  # read again when the exporter starts; checked here
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    if settings.follow_capture_dirs and workers > 1:
        # One follower per directory: N workers would each tail it (safe, but N times the I/O).
        raise click.UsageError("--follow-capture-dir needs --workers 1")
    try:
        settings.check_bind_is_safe()
    except LedgerError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise SystemExit(2) from exc
    if upgrade:
        # The views are rebuilt by the projector while the server serves: appends never wait.
        _report_rebuild(run_async(lambda: upgrade_with_settings(settings, build_views=False)))
    # The damage check first (once the schema is known to be at head): reading the projections'
    # versions from a damaged file would end in the driver's error, not a FAIL line.
    run_async(lambda: migrate.ensure_at_head(settings.resolved_database_url))
    _refuse_a_damaged_store(settings, serving=True)
    run_async(lambda: ensure_database_ready(settings.resolved_database_url))
    try:
        ensure_control_token(settings)
    except LedgerError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise SystemExit(2) from exc
    if settings.control_token is None:
        # soft_wrap: a long path must stay on one line, copyable.
        err.print(f"control token: {control_token_path(settings)} (mode 0600)", soft_wrap=True)
    if workers == 1:
        app = create_app(settings)
        settle_server_process(settings.switch_interval_ms)
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level=log_level,
            **uvicorn_options(settings),
        )
        return
    # Worker processes build their settings from the environment: hand them this command's.
    overrides = {
        **(ctx.obj or {}),
        "host": host,
        "port": port,
        "insecure": insecure,
        "read_only": read_only,
    }
    os.environ.update(
        {
            # Mappings (--upstream) as JSON, which is how pydantic-settings reads them.
            f"LEDGER_{name.upper()}": json.dumps(value) if isinstance(value, dict) else str(value)
            for name, value in overrides.items()
            if value is not None
        }
    )
    uvicorn.run(
        "ledger.app.http.app:create_app_from_environment",
        factory=True,
        workers=workers,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        **uvicorn_options(settings),
    )


@click.group()
def db() -> None:
    """Schema migrations (alembic)."""


@db.command("upgrade")
@click.argument("revision", default="head")
@database_options
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Upgrade the database to REVISION (default: head); at head, rebuild from the log any
    projection the running code writes differently (docs/operations.md)."""
    from ledger.app.bootstrap import upgrade_with_settings

    settings = settings_from(ctx)
    _report_rebuild(run_async(lambda: upgrade_with_settings(settings, revision)))
    current = run_async(lambda: migrate.current_revision(settings.resolved_database_url))
    click.echo(f"database at {current}")


def _report_rebuild(report: RebuildReport | None) -> None:
    if report is None or not report.stale:
        return
    # soft_wrap: each message stays one line, whole in a server's log.
    err.print(f"stale projections: {', '.join(report.stale)}", soft_wrap=True)
    if report.events:
        err.print(
            f"rebuilt the write side's projections from the log ({report.events:,} events in "
            f"{report.seconds:.2f} s; appends waited for it)",
            soft_wrap=True,
        )
    if report.views_events or report.views_seconds:
        err.print(
            f"rebuilt the views from the log beside the live ones and swapped them in "
            f"({report.views_events:,} events in {report.views_seconds:.2f} s, a page at a "
            "time; appends and reads went on between pages)",
            soft_wrap=True,
        )
    elif report.views_reset:
        err.print(
            "the views are built again from seq 0 beside the live ones: the projector builds "
            "them while the server serves and swaps them in at the head (the live views answer "
            "until then, kept current unless the views' columns changed; /readyz says how far)",
            soft_wrap=True,
        )


@db.command("downgrade")
@click.argument("revision")
@database_options
@click.pass_context
def db_downgrade(ctx: click.Context, revision: str) -> None:
    """Downgrade the database to REVISION (projections only; events are kept)."""
    settings = settings_from(ctx)
    run_async(lambda: migrate.downgrade(settings.resolved_database_url, revision))
    click.echo(
        f"database at {run_async(lambda: migrate.current_revision(settings.resolved_database_url))}"
    )


@db.command("current")
@database_options
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the database's revision."""
    settings = settings_from(ctx)
    click.echo(
        run_async(lambda: migrate.current_revision(settings.resolved_database_url)) or "<empty>"
    )


@db.command("check")
@skip_integrity_check_option
@database_options
@click.pass_context
def db_check(ctx: click.Context, integrity_check: bool | None) -> None:
    """Exit non-zero unless the database is at the head revision, every projection was built
    by this version of the ledger, and the store passes the start-up check of ``serve``."""
    from ledger.app.bootstrap import ensure_database_ready

    settings = settings_from(ctx, integrity_check=integrity_check)
    run_async(lambda: migrate.ensure_at_head(settings.resolved_database_url))
    _refuse_a_damaged_store(settings, serving=False)
    run_async(lambda: ensure_database_ready(settings.resolved_database_url))
    click.echo(f"database at head ({migrate.head_revision()})")


def _refuse_a_damaged_store(settings: Settings, *, serving: bool) -> None:
    """Print a FAIL line per problem of the start-up check; exit 1 unless serving read-only."""
    from ledger.app.bootstrap import store_integrity_problems

    problems = run_async(lambda: store_integrity_problems(settings))
    if not problems:
        return
    for problem in problems:
        click.echo(f"FAIL {problem}", err=True)
    advice = (
        "this store is not fit to take writes: run `ledger verify` for the full report, "
        "restore a backup (`ledger restore`), or serve it read-only (`ledger serve "
        "--read-only`); docs/operations.md, 'A damaged store'"
    )
    if serving and settings.read_only:
        click.echo(f"serving read-only: {advice}", err=True)
        return
    click.echo(advice, err=True)
    raise SystemExit(1)


@click.command()
@click.option("--skip-projections", is_flag=True, help="Check the hash chain only")
@click.option(
    "--checkpoint",
    "checkpoint_files",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A checkpoint kept elsewhere (a witness file, or the JSON of "
    "GET /v1/checkpoints/latest); repeatable",
)
@click.option(
    "--public-key",
    "public_key_file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="The key checkpoints are checked with (default: the data dir's signing key)",
)
@database_options
@click.pass_context
def verify(
    ctx: click.Context,
    skip_projections: bool,
    checkpoint_files: tuple[Path, ...],
    public_key_file: Path | None,
) -> None:
    """Compare the log with every signed checkpoint it can reach, recompute the hash chain,
    check the fences, and rebuild every projection from seq 0 and compare."""
    from ledger.app.cli.verify_run import CheckpointSources, run_verify

    settings = settings_from(ctx)
    sources = CheckpointSources(
        files=[*settings.witness_files, *checkpoint_files],
        required=list(checkpoint_files),
        public_key_file=public_key_file or settings.resolved_checkpoint_key_file,
    )
    if not run_check(lambda: run_verify(settings, sources, skip_projections=skip_projections)):
        raise SystemExit(1)


@click.command()
@click.option(
    "--after", type=int, default=0, show_default=True, help="Print events with seq > AFTER"
)
@click.option("--limit", type=int, default=None, help="Stop after this many events")
@click.option("--rollout", "rollout_id", help="Only this rollout's events")
@click.option("--follow", is_flag=True, help="Keep printing new events as they are appended")
@click.option(
    "--interval", type=float, default=0.5, show_default=True, help="Poll interval for --follow"
)
@database_options
@click.pass_context
def events(
    ctx: click.Context,
    after: int,
    limit: int | None,
    rollout_id: str | None,
    follow: bool,
    interval: float,
) -> None:
    """Print the event log as JSON lines."""
    settings = settings_from(ctx)
    catalogue = default_catalogue()

    from ledger.app.bootstrap import opened_reader

    async def run() -> None:
        cursor, printed = after, 0
        async with opened_reader(settings, pooled=True) as reader:
            while True:
                async with reader.engine.connect() as conn:
                    page = await read_events(
                        conn, catalogue, after=cursor, limit=500, rollout_id=rollout_id
                    )
                for event in page:
                    record = dict(event.__dict__, recorded_at=event.recorded_at.isoformat())
                    sys.stdout.write(json.dumps(record, sort_keys=True) + "\n")
                    cursor, printed = event.seq, printed + 1
                    if limit is not None and printed >= limit:
                        return
                sys.stdout.flush()
                if not page:
                    if not follow:
                        return
                    await asyncio.sleep(interval)

    with contextlib.suppress(KeyboardInterrupt):
        run_async(run)


@click.command()
@click.argument("query")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="At most this many rows (default 10000) [LEDGER_SQL_MAX_ROWS]",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Cancel the query after this many seconds (default 30) [LEDGER_SQL_TIMEOUT_S]",
)
@database_options
@click.pass_context
def sql(ctx: click.Context, query: str, fmt: str, limit: int | None, timeout: float | None) -> None:
    """Run a read-only SQL query (writes, ATTACH and pragma changes are refused)."""
    settings = settings_from(ctx)
    max_rows = limit if limit is not None else settings.sql_max_rows
    result = run_async(
        lambda: run_readonly_query(
            settings.resolved_database_url,
            query,
            limit=max_rows,
            timeout_s=timeout if timeout is not None else settings.sql_timeout_s,
        )
    )
    if result.truncated:
        err.print(f"note: more rows than the limit; the first {max_rows} are shown (--limit)")
    if fmt == "json":
        for row in result.rows:
            click.echo(json.dumps(dict(zip(result.columns, row, strict=True)), default=str))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(result.columns)
        writer.writerows(result.rows)
    else:
        table = Table(*result.columns)
        for row in result.rows:
            table.add_row(*("NULL" if v is None else str(v) for v in row))
        Console().print(table)


@click.command()
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@database_options
@click.pass_context
def project(ctx: click.Context, log_level: str) -> None:
    """Keep the views current: apply the log's events to every projection that follows it, from
    its checkpoint, and keep the JSONL mirror and the health findings, until interrupted
    (`ledger serve` runs the same beside itself, as `python -m ledger.app.projector_child`)."""
    from ledger.app.projector_child import run

    # This process is the projector, whatever LEDGER_PROJECTOR says (it tells `serve` where
    # the followers run).
    run(settings_from(ctx, projector="process"), log_level=log_level, until_stdin_closes=False)


def register(main: click.Group) -> None:
    for command in (serve, project, db, verify, events, sql):
        main.add_command(command)
