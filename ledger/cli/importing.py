"""``ledger import``: existing Gym directories into the ledger (idempotent)."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.common import database_options


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
    raise click.ClickException("import is not available yet")


def register(main: click.Group) -> None:
    main.add_command(import_command)
