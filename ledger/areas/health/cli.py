"""Commands of the health area: ``ledger health`` and ``ledger perf-summary``."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from ledger.app.bootstrap import opened_reader
from ledger.app.cli.common import database_options, err, run_async, settings_from
from ledger.areas.evidence.service import EvidenceService
from ledger.areas.health.selection import Selection
from ledger.areas.health.service import HealthService, SelectionReport
from ledger.gym.health.catalogue import ALL_CHECKS
from ledger.gym.health.summary import QUALITY_SUMMARY_FILENAME, ROLLOUT_VERDICTS_FILENAME
from ledger.log.errors import BadRequest

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
out = Console()


def selection_options(command: F) -> F:
    """The selection, the same on both commands: an id glob, a window, a task, a run label,
    attempts."""
    for option in reversed(
        [
            click.argument("ids", required=False),
            click.option(
                "--since",
                type=click.DateTime(["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z"]),
                help="Rollouts whose last event is at or after this time (with its zone)",
            ),
            click.option(
                "--until",
                type=click.DateTime(["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z"]),
                help="... and before this time",
            ),
            click.option("--task", "task_id", help="Only this task id"),
            click.option(
                "--run",
                "run",
                help="Only rollouts labelled with this run (?run= on their ingest routes)",
            ),
            click.option(
                "--attempts",
                type=click.Choice(["latest", "all"]),
                default="latest",
                show_default=True,
                help="'latest': one attempt (<id>-a<n>) per (task, rollout); 'all': every one",
            ),
        ]
    ):
        command = option(command)
    return command


def _selection(
    ids: str | None,
    since: datetime | None,
    until: datetime | None,
    task_id: str | None,
    run: str | None,
    attempts: str,
) -> Selection:
    try:
        return Selection(
            ids=ids,
            since=since,
            until=until,
            task_id=task_id,
            run=run,
            attempts=attempts,  # type: ignore[arg-type]
        )
    except BadRequest as exc:
        raise click.UsageError(exc.message) from None


def _with_service(ctx: click.Context, use: Callable[[HealthService], Awaitable[T]]) -> T:
    settings = settings_from(ctx)

    async def run() -> T:
        async with opened_reader(settings, pooled=True) as reader:
            return await use(HealthService(reader.read_sync))

    return run_async(run)


def _coverage(ctx: click.Context, selection: Selection) -> dict[str, Any]:
    settings = settings_from(ctx)

    async def run() -> dict[str, Any]:
        async with opened_reader(settings, pooled=True) as reader:
            evidence = EvidenceService(reader.read_sync, settings.capture_grace_s)
            return await evidence.coverage(selection)

    return run_async(run)


def _coverage_line(figures: dict[str, Any]) -> str:
    return (
        f"{figures['admitted']} admitted, {figures['captured']} captured, "
        f"{figures['missing']} missing, {figures['pending']} pending, "
        f"{figures['captures_without_row']} captures without a lineage row "
        f"({figures['rollouts']} rollouts)"
    )


def render_coverage(coverage: dict[str, Any], console: Console) -> None:
    """The ledger's own check (not Gym's): every admitted call against its capture."""
    console.print(
        f"Call evidence (ledger check, grace {coverage['grace_s']:g} s): "
        + _coverage_line(coverage)
    )
    runs = coverage["runs"]
    if len(runs) > 1:
        for figures in runs:
            run = figures["run"] if figures["run"] is not None else "(unlabelled)"
            console.print(f"  run {run}: " + _coverage_line(figures))


def _write_atomically(path: Path, content: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    partial.replace(path)


def write_reports(report: SelectionReport, output_dir: Path) -> tuple[Path, Path]:
    """Gym's two files, in ``output_dir`` (created with its parents)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    summary_path = output_dir / QUALITY_SUMMARY_FILENAME
    verdicts_path = output_dir / ROLLOUT_VERDICTS_FILENAME
    _write_atomically(summary_path, report.summary_bytes())
    _write_atomically(verdicts_path, b"".join(report.verdict_lines()))
    return summary_path, verdicts_path


def render(report: SelectionReport, console: Console) -> None:
    run = report.summary["run"]
    counts = report.counts
    verdicts = run["verdicts"]
    console.print(
        f"Rollout health: {run['artifacts']['records']} checked, {verdicts['healthy']} healthy, "
        f"{verdicts['unhealthy']} unhealthy, {verdicts['unobserved']} unobserved"
        + (f" (ignored: {', '.join(run['ignored_checks'])})" if run["ignored_checks"] else "")
    )
    console.print(
        f"Selection: {counts.matched} matched, {counts.superseded_attempts} superseded "
        f"attempts left out, {counts.counted} counted"
    )
    table = Table(title="Checks")
    for column in ("check", "evaluated", "unobserved", "ignored", "issues"):
        table.add_column(column, justify="left" if column == "check" else "right")
    coverage = run["artifacts"]["coverage"]
    for check in ALL_CHECKS:
        figures = coverage[check]
        issues = run["issues"][check]
        table.add_row(
            check,
            str(figures["evaluated"]),
            str(figures["unobserved"]),
            str(figures["ignored"]),
            f"[red]{issues}[/red]" if issues else "0",
        )
    console.print(table)
    errors = run["stats"]["model_call_errors"]
    tokens = run["stats"]["tokens"]
    console.print(
        f"Model call errors: {errors['total']} in {errors['rollouts_affected']} rollouts "
        f"({errors['ended_on_error']} ended on one); by status: {errors['by_status'] or '-'}"
    )
    console.print(
        f"Tokens: transcript {tokens['prompt']}/{tokens['completion']}, "
        f"captured {tokens['capture_prompt']}/{tokens['capture_completion']} (prompt/completion)"
    )


@click.command()
@selection_options
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Write Gym's quality_summary.json and rollout_verdicts.jsonl here",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    help="A check id to skip (repeat, or comma-separate)",
)
@click.option("--json", "as_json", is_flag=True, help="Print the quality summary as JSON")
@database_options
@click.pass_context
def health(
    ctx: click.Context,
    ids: str | None,
    since: datetime | None,
    until: datetime | None,
    task_id: str | None,
    run: str | None,
    attempts: str,
    output_dir: Path | None,
    ignore: tuple[str, ...],
    as_json: bool,
) -> None:
    """Gym's rollout health checks over the selected rollouts' stored records.

    Each rollout's findings come from health_findings (kept by ledger serve) when they are as
    new as its record; other records are checked now. Same files either way. Then the
    ledger's own check: the selection's calls admitted, captured, missing and pending."""
    selection = _selection(ids, since, until, task_id, run, attempts)
    ignored = [part for value in ignore for part in value.split(",")]
    report = _with_service(ctx, lambda service: service.report(selection, ignored))
    coverage = _coverage(ctx, selection)
    if as_json:
        click.echo(report.summary_bytes().decode())
        render_coverage(coverage, err)
    else:
        render(report, out)
        render_coverage(coverage, out)
    if output_dir is not None:
        summary_path, _ = write_reports(report, output_dir)
        err.print(f"Quality summary: {summary_path}")


@click.command("perf-summary")
@selection_options
@database_options
@click.pass_context
def perf_summary_command(
    ctx: click.Context,
    ids: str | None,
    since: datetime | None,
    until: datetime | None,
    task_id: str | None,
    run: str | None,
    attempts: str,
) -> None:
    """Gym's perf_summary block over the selected rollouts (JSON; null when none has ng_perf)."""
    selection = _selection(ids, since, until, task_id, run, attempts)
    answer = _with_service(ctx, lambda service: service.perf(selection))
    click.echo(json.dumps(answer["perf_summary"]))
    counts = answer["selection"]
    err.print(
        f"{counts['matched']} matched, {counts['superseded_attempts']} superseded attempts "
        f"left out, {counts['counted']} counted"
    )


def register(main: click.Group) -> None:
    main.add_command(health)
    main.add_command(perf_summary_command)
