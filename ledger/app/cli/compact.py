"""``ledger compact [--dry-run]``: redact payloads of deleted generations (log/compaction.py)."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from ledger.app.bootstrap import opened_store
from ledger.app.cli.common import database_options, run_async, settings_from
from ledger.log.compaction import CompactionReport, compact


def _print(report: CompactionReport, *, dry_run: bool) -> None:
    verb = "would redact" if dry_run else "redacted"
    click.echo(
        f"{verb} {report.events:,} payloads of deleted generations in {len(report.rollouts):,} "
        f"rollouts, {report.payload_bytes:,} bytes of payload"
    )
    if report.by_kind:
        table = Table("kind", "events", "payload bytes")
        for kind, (count, size) in sorted(report.by_kind.items()):
            table.add_row(kind, f"{count:,}", f"{size:,}")
        Console().print(table)
    if report.recorded:
        click.echo(
            f"recorded in ledger.compacted events at seq {', '.join(map(str, report.recorded))}"
        )


@click.command("compact")
@click.option("--dry-run", is_flag=True, help="Print what would be redacted and the bytes freed")
@database_options
@click.pass_context
def compact_command(ctx: click.Context, dry_run: bool) -> None:
    """Set the payloads of events of deleted generations to NULL (hashes and the chain stay,
    so `ledger verify` still passes). Safe while the server runs."""
    settings = settings_from(ctx)

    async def run() -> CompactionReport:
        async with opened_store(settings) as store:
            return await compact(store, dry_run=dry_run)

    _print(run_async(run), dry_run=dry_run)


def register(main: click.Group) -> None:
    main.add_command(compact_command)
