"""``ledger import``: existing Gym directories into the ledger (idempotent)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.progress import Progress

from ledger.bootstrap import build_store
from ledger.cli.common import database_options, err, run_async, settings_from
from ledger.config import Settings
from ledger.importer.lineage import LineageImportReport, import_lineage_dir


async def _import_lineage(settings: Settings, directory: Path) -> LineageImportReport:
    store = build_store(settings)
    await store.open()
    try:
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task("lineage ledgers", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            return await import_lineage_dir(store, directory, progress=advance)
    finally:
        await store.close()


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
@database_options
@click.pass_context
def import_command(ctx: click.Context, capture_dir: Path | None, lineage_dir: Path | None) -> None:
    """Import Gym capture files and/or lineage ledgers; re-running adds nothing."""
    if capture_dir is None and lineage_dir is None:
        raise click.UsageError("give --capture-dir and/or --lineage-dir")
    if capture_dir is not None:
        raise click.ClickException("--capture-dir import is not available yet")
    settings = settings_from(ctx)
    if lineage_dir is not None:
        report = run_async(lambda: _import_lineage(settings, lineage_dir))
        for line in report.skipped:
            err.print(f"skipped {line}")
        click.echo(report.summary())


def register(main: click.Group) -> None:
    main.add_command(import_command)
