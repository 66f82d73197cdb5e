"""``ledger export --otlp URL``: the selected rollouts as OTLP traces, with a progress bar and a
summary (spans sent, refused by the collector, requests retried)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import click
from rich.progress import Progress

from ledger.app.bootstrap import opened_reader
from ledger.app.cli.common import err, run_async
from ledger.app.config import Settings
from ledger.areas.health.selection import Selection
from ledger.log.errors import BadRequest

if TYPE_CHECKING:
    from ledger.areas.otel.export import ExportSummary
    from ledger.areas.otel.sender import OtlpSender


def otlp_selection(ids: str | None, since: datetime | None, run: str | None) -> Selection:
    try:
        # Every attempt: each is a trace of its own in the collector.
        return Selection(ids=ids, since=since, run=run, attempts="all")
    except BadRequest as exc:
        raise click.UsageError(exc.message) from None


def export_otlp(settings: Settings, endpoint: str, selection: Selection, *, content: bool) -> None:
    # Imported here: every other command of the command line would load the export's HTTP
    # client and protobuf for nothing.
    from ledger.areas.otel.export import export_selection
    from ledger.areas.otel.mapping import MappingOptions
    from ledger.areas.otel.sender import ExportFailed, OtlpSender, headers_from_environment

    try:
        headers = headers_from_environment()
        sender = OtlpSender(endpoint, headers=headers)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

    async def run() -> ExportSummary:
        async with opened_reader(settings) as reader, sender:
            with Progress(console=err, transient=True) as progress:
                task = progress.add_task("export to OTLP", total=None)
                return await export_selection(
                    reader.read_sync,
                    sender,
                    selection,
                    options=MappingOptions(content=content),
                    on_total=lambda total: progress.update(task, total=total),
                    on_rollouts=lambda n: progress.advance(task, n),
                )

    try:
        summary = run_async(run)
    except ExportFailed as exc:
        _print_tally(sender)
        err.print(f"error: {exc.message}")
        raise SystemExit(1) from None
    err.print(f"exported {summary.rollouts} rollouts to {sender.url}")
    _print_tally(sender)
    if sender.tally.refused:
        raise SystemExit(1)


def _print_tally(sender: OtlpSender) -> None:
    tally = sender.tally
    err.print(
        f"spans sent: {tally.sent}, refused: {tally.refused}, requests retried: {tally.retried}"
    )
    for refusal in tally.refusals[:5]:
        err.print(f"  the collector refused spans: {refusal}")


otlp_options = (
    click.option("--otlp", "otlp", metavar="URL", help="Send OTLP traces to this collector"),
    click.option("--run", "run_label", help="With --otlp: only rollouts labelled with this run"),
    click.option("--id", "ids", metavar="GLOB", help="With --otlp: only rollout ids matching"),
    click.option(
        "--since",
        type=click.DateTime(["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z"]),
        help="With --otlp: rollouts whose last event is at or after this time (with its zone)",
    ),
    click.option(
        "--content",
        is_flag=True,
        help="With --otlp: include requests, responses and tool outputs (off by default)",
    ),
)
