"""``ledger backup DEST`` and ``ledger restore SRC`` (log/backup.py; docs/operations.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from ledger.app.cli.common import database_options, err, run_async, settings_from
from ledger.log.backup import (
    BackupReport,
    backup_postgres,
    backup_sqlite,
    restore_postgres,
    restore_sqlite,
)
from ledger.log.engines import is_sqlite_url, sqlite_path
from ledger.log.witness import set_aside


def _bar() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def _spinner() -> Progress:
    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err
    )


def _summary(verb: str, report: BackupReport) -> str:
    figures = f"{report.bytes:,} bytes in {report.seconds:.2f} s"
    if report.head_seq is not None:
        figures += f", {report.events:,} events, head seq {report.head_seq}"
    return f"{verb} {report.path}: {figures}"


@click.command()
@click.argument("dest", type=click.Path(path_type=Path, dir_okay=False))
@database_options
@click.pass_context
def backup(ctx: click.Context, dest: Path) -> None:
    """Copy the whole database to DEST while the server keeps writing (a consistent snapshot).

    SQLite: VACUUM INTO (bounded time under load); PostgreSQL: pg_dump --format=custom.
    """
    settings = settings_from(ctx)
    url = settings.resolved_database_url

    async def run() -> BackupReport:
        if is_sqlite_url(url):
            with _bar() as progress:
                task = progress.add_task("backup", total=None)
                return await asyncio.to_thread(
                    backup_sqlite,
                    sqlite_path(url),
                    dest,
                    progress=lambda done, total: progress.update(
                        task, completed=done, total=max(done, total)
                    ),
                )
        with _spinner() as progress:
            progress.add_task("pg_dump", total=None)
            return await asyncio.to_thread(backup_postgres, url, dest)

    report = run_async(run)
    click.echo(_summary("backed up to", report))


@click.command()
@click.argument("src", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@database_options
@click.pass_context
def restore(ctx: click.Context, src: Path) -> None:
    """Restore a backup into an empty data directory (SQLite) or an empty database (PostgreSQL).

    The restored log gets a new epoch: a mirror checkpoint of the old one is not trusted, and
    the witness files of signed checkpoints are set aside.
    """
    settings = settings_from(ctx)
    url = settings.resolved_database_url

    async def run() -> tuple[BackupReport, str | None]:
        if is_sqlite_url(url):
            with _bar() as progress:
                task = progress.add_task("restore", total=None)
                return await asyncio.to_thread(
                    restore_sqlite,
                    src,
                    Path(sqlite_path(url)),
                    settings.data_dir,
                    progress=lambda done, total: progress.update(
                        task, completed=done, total=max(done, total)
                    ),
                )
        with _spinner() as progress:
            progress.add_task("pg_restore", total=None)
            return await restore_postgres(src, url)

    report, epoch = run_async(run)
    click.echo(_summary("restored", report))
    # The restored log is a prefix of the one the checkpoints witnessed: rewound on purpose, so
    # they are set aside (kept) instead of refusing the restored store as one that lost its tail.
    for path in settings.witness_files:
        moved = set_aside(path)
        if moved is not None:
            click.echo(f"checkpoints of the log before the restore set aside: {moved}")
    click.echo(f"new epoch {epoch}" if epoch else "no epoch yet: run `ledger db upgrade`")


def register(main: click.Group) -> None:
    for command in (backup, restore):
        main.add_command(command)
