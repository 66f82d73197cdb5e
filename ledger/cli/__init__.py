"""The ``ledger`` command: a thin layer over the library (sqlite-utils style).

Each area keeps its commands in its own module and registers them on ``main``.
"""

from __future__ import annotations

import click

from ledger.cli import captures, core, importing, lineage, mirror, observations
from ledger.cli.common import database_options


@click.group()
@database_options
@click.pass_context
def main(ctx: click.Context) -> None:
    """The rollout ledger."""
    ctx.ensure_object(dict)


for _module in (core, captures, lineage, mirror, observations, importing):
    _module.register(main)

__all__ = ["main"]
