"""What ``ledger verify`` runs: both checks with a progress bar each, and their rates.

The log is read through an engine, so each page is its own short transaction (log/verify.py).
"""

from __future__ import annotations

import time

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.ext.asyncio import AsyncEngine

from ledger.app.areas import default_catalogue, default_projectors
from ledger.app.bootstrap import opened_reader
from ledger.app.cli.common import err
from ledger.app.config import Settings
from ledger.areas.health.findings_verify import verify_findings
from ledger.log.collection import fewer_collections
from ledger.log.queries import head_seq
from ledger.log.verify import verify_chain, verify_projections


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def _rate(events: int, seconds: float) -> str:
    return f"{events / seconds:,.0f} events/s" if seconds > 0 else "- events/s"


class _Bar:
    """Advances a task and shows the rate so far."""

    def __init__(self, progress: Progress, description: str, total: int) -> None:
        self._progress = progress
        self._task = progress.add_task(description, total=total, rate="")
        self._started = time.perf_counter()
        self._done = 0

    def __call__(self, n: int) -> None:
        self._done += n
        rate = _rate(self._done, time.perf_counter() - self._started)
        # The total grows when the server appends while verify runs.
        total = max(self._done, self._progress.tasks[self._task].total or 0)
        self._progress.update(self._task, advance=n, total=total, rate=rate)


async def run_verify(settings: Settings, *, skip_projections: bool) -> bool:
    # The command's process does nothing else: the collector may run less (log/collection.py).
    async with opened_reader(settings) as reader:
        with fewer_collections():
            return await _verify(reader.engine, skip_projections=skip_projections)


async def _verify(engine: AsyncEngine, *, skip_projections: bool) -> bool:
    async with engine.connect() as conn:
        total = await head_seq(conn)
    started = time.perf_counter()
    with _progress() as progress:
        chain = await verify_chain(engine, progress=_Bar(progress, "hash chain", total))
    seconds = time.perf_counter() - started
    if not chain.ok:
        click.echo(f"FAIL hash chain: first bad seq {chain.first_bad_seq}: {chain.problem}")
        return False
    click.echo(
        f"ok   hash chain: {chain.events} events in {seconds:.2f} s "
        f"({_rate(chain.events, seconds)})"
    )
    if skip_projections:
        return True
    started = time.perf_counter()
    with _progress() as progress:
        report = await verify_projections(
            engine,
            default_catalogue(),
            # Capture-only records' templates are checked against full rebuilds.
            default_projectors(check_templates=True),
            progress=_Bar(progress, "projections", chain.events),
        )
    seconds = time.perf_counter() - started
    for difference in report.differences:
        click.echo(f"FAIL projection {difference}")
    if not report.ok:
        return False
    click.echo(
        f"ok   projections: identical to a rebuild from seq 0 ({report.events} events "
        f"in {seconds:.2f} s, {_rate(report.events, seconds)})"
    )
    started = time.perf_counter()
    findings = await verify_findings(engine)
    seconds = time.perf_counter() - started
    for difference in findings.differences:
        click.echo(f"FAIL {difference}")
    if findings.ok:
        click.echo(
            f"ok   health findings: {findings.checked} current rows equal their records "
            f"checked again ({findings.behind} behind, checked on read; "
            f"{findings.orphaned} of deleted rollouts) in {seconds:.2f} s"
        )
    return findings.ok
