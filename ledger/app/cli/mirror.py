"""``ledger mirror status|verify|rebuild``: the JSONL mirror as seen from the database."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from ledger.app.areas import default_mirror_areas
from ledger.app.bootstrap import opened_reader
from ledger.app.cli.common import database_options, err, run_async, run_check, settings_from
from ledger.app.config import Settings
from ledger.log.errors import Conflict
from ledger.mirror.checkpoint import MirrorLag, read_checkpoint, read_lag, write_checkpoint
from ledger.mirror.election import election_for
from ledger.mirror.sync import MirrorComparison, compare_mirror, rebuild_mirror, snapshot


@click.group()
def mirror() -> None:
    """The Gym-compatible JSONL mirror (written by `ledger serve`)."""


@mirror.command("status")
@database_options
@click.pass_context
def status(ctx: click.Context) -> None:
    """Checkpoint, head and lag (events and seconds)."""
    settings = settings_from(ctx)

    async def run() -> MirrorLag:
        async with opened_reader(settings) as reader, snapshot(reader.engine) as conn:
            return await read_lag(conn)

    lag = run_async(run)
    click.echo(f"mirror dir:   {settings.resolved_mirror_dir}")
    click.echo(f"checkpoint:   seq {lag.checkpoint}")
    click.echo(f"head:         seq {lag.head}")
    click.echo(f"lag:          {lag.events} events, {lag.seconds(datetime.now(UTC)):.1f} s")


def _report(comparison: MirrorComparison, verb: str) -> None:
    for line in comparison.differences:
        click.echo(line)
    click.echo(f"{verb} {comparison.rollouts} rollouts at seq {comparison.head}")


@mirror.command("verify")
@database_options
@click.pass_context
def verify(ctx: click.Context) -> None:
    """Compare every mirror file with the database; exit 1 on any difference."""
    settings = settings_from(ctx)

    async def run() -> tuple[MirrorComparison, int]:
        async with opened_reader(settings) as reader, snapshot(reader.engine) as conn:
            checkpoint = await read_checkpoint(conn)
            comparison = await compare_mirror(
                conn, settings.resolved_mirror_dir, default_mirror_areas()
            )
        return comparison, checkpoint

    comparison, checkpoint = run_check(run)
    _report(comparison, "compared")
    if comparison.differences:
        if checkpoint < comparison.head:
            click.echo(f"(the mirror is {comparison.head - checkpoint} events behind the log)")
        click.echo(f"FAIL {len(comparison.differences)} differences")
        raise SystemExit(1)
    click.echo("ok   the mirror matches the database")


async def rebuild_with_settings(settings: Settings) -> MirrorComparison:
    election = election_for(settings.resolved_database_url)
    if not await election.try_acquire():
        raise Conflict(
            "a mirror follower is running on this database (a `ledger serve`); "
            "stop it or let it converge (`ledger mirror status`)"
        )
    try:
        # Not read-only: the rebuild ends by writing the mirror's own checkpoint row.
        async with opened_reader(settings, read_only=False) as database:
            async with snapshot(database.engine) as conn:
                comparison = await rebuild_mirror(
                    conn, settings.resolved_mirror_dir, default_mirror_areas()
                )
            async with database.engine.begin() as conn:
                await conn.run_sync(lambda sync: write_checkpoint(sync, comparison.head))
        return comparison
    finally:
        await election.release()


@mirror.command("rebuild")
@database_options
@click.pass_context
def rebuild(ctx: click.Context) -> None:
    """Rewrite the whole mirror from the database (refused while a server mirrors it)."""
    settings = settings_from(ctx)
    comparison = run_async(lambda: rebuild_with_settings(settings))
    _report(comparison, "rebuilt")
    err.print(f"checkpoint set to seq {comparison.head}")


def register(main: click.Group) -> None:
    main.add_command(mirror)
