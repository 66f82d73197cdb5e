"""``ledger compact [--dry-run]``: redact payloads of deleted generations (log/compaction.py)."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from ledger.app.areas import default_catalogue, default_projectors
from ledger.app.cli.common import database_options, run_async, settings_from
from ledger.log.compaction import CompactionReport, compact
from ledger.log.store import LedgerStore


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
        store = LedgerStore(
            settings.resolved_database_url,
            default_catalogue(),
            default_projectors(),
            busy_timeout_ms=settings.busy_timeout_ms,
        )
        await store.open()
        try:
            return await compact(store, dry_run=dry_run)
        finally:
            await store.close()

    _print(run_async(run), dry_run=dry_run)


def register(main: click.Group) -> None:
    main.add_command(compact_command)
