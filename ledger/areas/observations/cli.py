"""Commands of the observations area: ``ledger export``."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import IO

import click
from rich.progress import Progress

from ledger.app.bootstrap import opened_reader
from ledger.app.cli.common import database_options, err, run_async, settings_from
from ledger.areas.observations.queries import ExportFilter, count_exported
from ledger.areas.observations.service import RecordView, export_lines
from ledger.areas.otel.cli import export_otlp, otlp_options, otlp_selection
from ledger.gym.ids import ROLLOUT_ID_PATTERN
from ledger.log.errors import BadRequest


def shard_file_name(shard: str) -> str:
    """Gym's shard file; the label becomes a file name, so it follows the rollout-id charset."""
    if ROLLOUT_ID_PATTERN.fullmatch(shard) is None:
        raise BadRequest(
            f"--shard must be letters, digits, dots, dashes or underscores, starting with a "
            f"letter or digit; got {shard!r}"
        )
    return f"rollouts-{shard}.jsonl"


@click.command()
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    help="File to write (default stdout); with --layout gym-shard, the directory",
)
@click.option(
    "--after-seq",
    type=int,
    default=0,
    show_default=True,
    help="Records last changed after this seq",
)
@click.option("--until-seq", type=int, default=None, help="... and at or before this seq")
@click.option("--state", type=click.Choice(["live", "retired"]), help="Only rollouts in this state")
@click.option("--task", "task_id", help="Only this task id")
@click.option(
    "--view",
    type=click.Choice(["stored", "export"]),
    default="stored",
    show_default=True,
    help="'export': Gym's export view (no ng_trajectory, no payloads in calls)",
)
@click.option(
    "--layout",
    type=click.Choice(["jsonl", "gym-shard"]),
    default="jsonl",
    show_default=True,
    help="'gym-shard': write rollouts-<shard>.jsonl in the --output directory",
)
@click.option("--shard", help="Shard label for --layout gym-shard")
@click.option("--page-size", type=click.IntRange(1, 10_000), default=500, show_default=True)
@otlp_options[0]
@otlp_options[1]
@otlp_options[2]
@otlp_options[3]
@otlp_options[4]
@database_options
@click.pass_context
def export(
    ctx: click.Context,
    output: Path | None,
    after_seq: int,
    until_seq: int | None,
    state: str | None,
    task_id: str | None,
    view: RecordView,
    layout: str,
    shard: str | None,
    page_size: int,
    otlp: str | None,
    run_label: str | None,
    ids: str | None,
    since: datetime | None,
    content: bool,
) -> None:
    """Stream enriched rollout records as JSONL (constant memory, in the order they changed);
    with --otlp, send them as OpenTelemetry traces instead (docs/otel.md)."""
    if otlp is not None:
        jsonl_only = {
            "--output": output is not None,
            "--layout": layout != "jsonl",
            "--view": view != "stored",
            "--state": state is not None,
            "--task": task_id is not None,
            "--after-seq": after_seq != 0,
            "--until-seq": until_seq is not None,
        }
        given = [name for name, set_ in jsonl_only.items() if set_]
        if given:
            raise click.UsageError(f"{', '.join(given)}: not with --otlp")
        export_otlp(
            settings_from(ctx), otlp, otlp_selection(ids, since, run_label), content=content
        )
        return
    otlp_only = {"--run": run_label, "--id": ids, "--since": since, "--content": content or None}
    given = [name for name, value in otlp_only.items() if value is not None]
    if given:
        raise click.UsageError(f"{', '.join(given)}: only with --otlp URL")
    if layout == "gym-shard":
        if shard is None or output is None:
            raise click.UsageError("--layout gym-shard needs --shard NAME and --output DIRECTORY")
    elif shard is not None:
        raise click.UsageError("--shard only applies to --layout gym-shard")
    settings = settings_from(ctx)
    selection = ExportFilter(after_seq=after_seq, until_seq=until_seq, state=state, task_id=task_id)

    target = output
    if layout == "gym-shard":
        assert output is not None and shard is not None
        try:
            target = output / shard_file_name(shard)
        except BadRequest as exc:
            raise click.UsageError(exc.message) from None
        output.mkdir(parents=True, exist_ok=True)

    async def run() -> int:
        async with opened_reader(settings, pooled=True) as reader:
            async with reader.read() as conn:
                total = await count_exported(conn, selection)
            lines = export_lines(reader.read, selection, view=view, page_size=page_size)
            with Progress(console=err, transient=True) as progress:
                task = progress.add_task("export", total=total)
                if target is None:
                    return await _write(lines, sys.stdout, lambda: progress.advance(task))
                # Written beside the target and renamed: a reopened shard is replaced whole.
                partial = target.with_name(target.name + ".partial")
                with partial.open("w", encoding="utf-8") as handle:
                    written = await _write(lines, handle, lambda: progress.advance(task))
                    handle.flush()
                    os.fsync(handle.fileno())
                partial.replace(target)
                return written

    written = run_async(run)
    err.print(f"exported {written} records" + (f" to {output}" if output is not None else ""))


async def _write(lines: AsyncIterator[str], handle: IO[str], advance: Callable[[], None]) -> int:
    written = 0
    async for line in lines:
        handle.write(line)
        written += 1
        advance()
    return written


def register(main: click.Group) -> None:
    """Add this area's commands to ``main``."""
    main.add_command(export)
