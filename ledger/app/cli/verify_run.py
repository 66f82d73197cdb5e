"""What ``ledger verify`` runs: both checks with a progress bar each, and their rates.

The log is read through an engine, so each page is its own short transaction (log/verify.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import click
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.ext.asyncio import AsyncEngine

from ledger.app.areas import default_catalogue, default_projectors
from ledger.app.bootstrap import catch_up_views, opened_reader, opened_store
from ledger.app.cli.common import err
from ledger.app.config import Settings
from ledger.areas.health.findings_verify import verify_findings
from ledger.log.checkpoint_key import load_public_key
from ledger.log.collection import fewer_collections
from ledger.log.errors import LedgerError
from ledger.log.head_check import compare_with_checkpoints, fence_problems
from ledger.log.integrity import quick_check_problems
from ledger.log.queries import head_seq
from ledger.log.verify import verify_chain, verify_projections
from ledger.log.witness import WitnessedCheckpoint, read_checkpoint_file


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


@dataclass(frozen=True)
class CheckpointSources:
    """Where ``verify`` looks for checkpoints: the witness files (a missing one is just empty)
    and copies named on the command line (``required``: one that cannot be read is a FAIL)."""

    files: list[Path]
    required: list[Path]
    public_key_file: Path


def _read_checkpoints(sources: CheckpointSources) -> tuple[list[WitnessedCheckpoint], list[str]]:
    found: list[WitnessedCheckpoint] = []
    problems: list[str] = []
    for path in dict.fromkeys(sources.files):
        if path in sources.required and not path.is_file():
            problems.append(f"{path}: no such checkpoint file")
            continue
        reading = read_checkpoint_file(path)
        found.extend(reading.checkpoints)
        problems.extend(reading.problems)
    return found, problems


def _public_key(path: Path) -> Ed25519PublicKey | None:
    if not path.is_file():
        return None
    try:
        return load_public_key(path)
    except LedgerError:
        return None


async def _verify_checkpoints(engine: AsyncEngine, sources: CheckpointSources) -> bool:
    witnessed, problems = _read_checkpoints(sources)
    for problem in problems:
        click.echo(f"FAIL checkpoints: {problem}")
    if not witnessed:
        click.echo("ok   checkpoints: none found to compare with")
        return not problems
    key = _public_key(sources.public_key_file)
    if key is None:
        click.echo(
            f"FAIL checkpoints: {len(witnessed)} found but no key to check them with "
            f"({sources.public_key_file} is missing or not a key): give --public-key"
        )
        return False
    async with engine.connect() as conn:
        report = await conn.run_sync(lambda sync: compare_with_checkpoints(sync, witnessed, key))
    for problem in report.problems:
        click.echo(f"FAIL checkpoint {problem}")
    if report.ok and report.latest is not None:
        click.echo(
            f"ok   checkpoints: the log holds all {report.compared} signed checkpoints "
            f"(latest seq {report.latest.seq}, published {report.latest.published_at})"
        )
    return report.ok and not problems


async def _verify_file(engine: AsyncEngine) -> bool:
    """SQLite's own check of every page (PostgreSQL checks its pages as it reads them)."""
    if engine.dialect.name != "sqlite":
        return True
    started = time.perf_counter()
    async with engine.connect() as conn:
        problems = await conn.run_sync(quick_check_problems)
    for problem in problems:
        click.echo(f"FAIL {problem}")
    if not problems:
        seconds = time.perf_counter() - started
        click.echo(f"ok   database file: PRAGMA quick_check in {seconds:.2f} s")
    return not problems


async def run_verify(
    settings: Settings, sources: CheckpointSources, *, skip_projections: bool
) -> bool:
    # The command's process does nothing else: the collector may run less (log/collection.py).
    async with opened_reader(settings) as reader:
        with fewer_collections():
            if not await _verify_file(reader.engine):
                return False  # what follows would read the damaged pages
            checkpoints_ok = await _verify_checkpoints(reader.engine, sources)
            verified = await _verify(
                reader.engine,
                skip_projections=skip_projections,
                catch_up=None if settings.read_only else settings,
            )
            return checkpoints_ok and verified


async def _catch_up_views(settings: Settings) -> None:
    """Bring the views to the head as the projector would (the same code), so that they are
    compared with the rebuild whether or not a server is running one."""
    started = time.perf_counter()
    async with opened_store(settings) as store:
        applied = await catch_up_views(store)
    if applied:
        click.echo(
            f"ok   views: brought to the head ({applied} events in "
            f"{time.perf_counter() - started:.2f} s)"
        )


async def _verify(
    engine: AsyncEngine, *, skip_projections: bool, catch_up: Settings | None
) -> bool:
    async with engine.connect() as conn:
        total = await head_seq(conn)
        fences = await conn.run_sync(fence_problems)
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
    for problem in fences:
        click.echo(f"FAIL fence: {problem}")
    if fences:
        return False
    click.echo("ok   fences: every retire and delete in the log holds in the rollouts' rows")
    if skip_projections:
        return True
    if catch_up is not None:
        await _catch_up_views(catch_up)
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
