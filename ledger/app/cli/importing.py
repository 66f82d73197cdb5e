"""``ledger import``: existing Gym directories into the ledger (idempotent)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from ledger.app.cli.common import database_options, err, run_async, settings_from
from ledger.app.config import Settings
from ledger.areas.captures.importer import (
    CaptureImportSummary,
    import_capture_dir,
    scan_capture_dir,
)
from ledger.areas.lineage.importer import LineageImportReport, import_lineage_dir
from ledger.areas.runs.labels import check_run_label
from ledger.log.errors import InvalidPayload


def import_captures(
    settings: Settings, directory: Path, run_label: str | None = None
) -> CaptureImportSummary:
    from ledger.app.bootstrap import opened_store

    _files, total = scan_capture_dir(directory)

    async def run() -> CaptureImportSummary:
        async with opened_store(settings) as store:
            with Progress(
                TextColumn("captures"),
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                console=err,
                transient=True,
            ) as progress:
                task = progress.add_task("captures", total=total)
                return await import_capture_dir(
                    store, directory, progress=lambda n: progress.advance(task, n), run=run_label
                )

    summary = run_async(run)
    click.echo(
        f"captures: {summary.files} files, {len(summary.rollouts)} rollouts, "
        f"{summary.lines} lines: {summary.captured} captured, {summary.damaged} damaged "
        f"(kept as evidence), {summary.already_present} already present, "
        f"{summary.markers} incomplete markers"
    )
    if summary.conflicting_ids:
        click.echo(
            f"captures: {summary.conflicting_ids} lines reuse a model_call_id with a different "
            "exchange; kept as damaged evidence"
        )
    if summary.intents or summary.unreadable_intents:
        click.echo(
            f"intents: {summary.intents} recorded, {summary.unreadable_intents} lines that are "
            "not a model call id"
        )
    for name in summary.skipped_files:
        click.echo(f"captures: skipped {name}: not a valid rollout id")
    if run_label is not None:
        click.echo(f"captures: {summary.labelled} rollouts labelled run {run_label!r}")
    for detail in summary.label_conflicts.values():
        click.echo(f"captures: skipped: {detail}")
    return summary


def import_lineage(settings: Settings, directory: Path) -> LineageImportReport:
    from ledger.app.bootstrap import opened_store

    async def run() -> LineageImportReport:
        async with opened_store(settings) as store:
            with Progress(console=err, transient=True) as progress:
                task = progress.add_task("lineage ledgers", total=None)

                def advance(done: int, total: int) -> None:
                    progress.update(task, completed=done, total=total)

                return await import_lineage_dir(store, directory, progress=advance)

    report = run_async(run)
    for line in report.skipped:
        err.print(f"skipped {line}")
    click.echo(report.summary())
    return report


def follow_captures(settings: Settings, directory: Path) -> None:
    """Catch up with ``directory`` (a progress bar, then a summary), then follow it until
    interrupted (Ctrl-C or SIGTERM)."""
    import asyncio
    import signal

    from ledger.app.bootstrap import build_store, follow_options
    from ledger.areas.captures.follower import CaptureDirFollower

    async def run() -> None:
        store = build_store(settings)
        await store.open()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            with Progress(
                TextColumn("catching up"),
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                console=err,
                transient=True,
            ) as progress:
                task = progress.add_task("catch-up", total=None)

                def advance(done: int, total: int) -> None:
                    progress.update(task, completed=done, total=total)

                follower = CaptureDirFollower(
                    store, directory, options=follow_options(settings), progress=advance
                )
                await follower.start()
                caught_up = asyncio.create_task(follower.caught_up.wait())
                stopped = asyncio.create_task(stop.wait())
                ended = asyncio.create_task(follower.wait())
                await asyncio.wait({caught_up, stopped, ended}, return_when="FIRST_COMPLETED")
            if follower.caught_up.is_set():
                click.echo(f"captures: caught up: {follower.catch_up.summary()}")
                click.echo(f"captures: following {follower.key} ({follower.mode}); Ctrl-C stops")
                await asyncio.wait({stopped, ended}, return_when="FIRST_COMPLETED")
            if ended.done():
                ended.result()  # the follower's own error, shown as the command's
            await follower.stop()
            for pending in (caught_up, stopped, ended):
                pending.cancel()
            click.echo(f"captures: stopped; since catch-up: {follower.total.summary()}")
        finally:
            await store.close()

    run_async(run)


@click.command("import")
@click.option(
    "--capture-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="A Gym model_call_capture_dir (<id>.capture.jsonl, <id>.capture.incomplete)",
)
@click.option(
    "--lineage-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="A Gym token-capture dir (<id>.lineage.jsonl, <id>.lineage.retired)",
)
@click.option(
    "--follow",
    is_flag=True,
    help="Keep following --capture-dir as Gym writes it (checkpointed; Ctrl-C stops)",
)
@click.option(
    "--poll",
    "force_polling",
    is_flag=True,
    default=None,
    help="With --follow: poll, not inotify (network filesystems) [LEDGER_FOLLOW_FORCE_POLLING]",
)
@click.option(
    "--run",
    help="Label every rollout of --capture-dir with this run (a rollout labelled otherwise "
    "is skipped and reported)",
)
@database_options
@click.pass_context
def import_command(
    ctx: click.Context,
    capture_dir: Path | None,
    lineage_dir: Path | None,
    follow: bool,
    force_polling: bool | None,
    run: str | None,
) -> None:
    """Import Gym capture files and/or lineage ledgers; re-running adds nothing."""
    if capture_dir is None and lineage_dir is None:
        raise click.UsageError("give --capture-dir and/or --lineage-dir")
    if run is not None:
        if capture_dir is None or follow:
            raise click.UsageError("--run labels the rollouts of --capture-dir (not --follow)")
        try:
            check_run_label(run, name="--run")
        except InvalidPayload as exc:
            raise click.UsageError(exc.message) from None
    if follow and (capture_dir is None or lineage_dir is not None):
        raise click.UsageError("--follow follows one --capture-dir (and no --lineage-dir)")
    settings = settings_from(ctx, follow_force_polling=force_polling)
    if capture_dir is not None and follow:
        follow_captures(settings, capture_dir)
    elif capture_dir is not None:
        import_captures(settings, capture_dir, run)
    if lineage_dir is not None:
        import_lineage(settings, lineage_dir)


def register(main: click.Group) -> None:
    main.add_command(import_command)
