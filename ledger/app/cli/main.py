"""The ``ledger`` group: the kernel's commands, then each area's (sqlite-utils style: a thin
layer over the library)."""

from __future__ import annotations

import click

from ledger.app.areas import areas
from ledger.app.cli import backup, compact, core, importing, mirror
from ledger.app.cli.common import database_options


@click.group()
@database_options
@click.pass_context
def main(ctx: click.Context) -> None:
    """The rollout ledger."""
    ctx.ensure_object(dict)


core.register(main)
mirror.register(main)
importing.register(main)
backup.register(main)
compact.register(main)
for _area in areas():
    _area.register_cli(main)

__all__ = ["main"]
