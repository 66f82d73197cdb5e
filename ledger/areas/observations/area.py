"""The observations area (bundles, results, the enriched record), as the composition root
sees it."""

from __future__ import annotations

import click
from fastapi import APIRouter

from ledger.app.area import Area, ProjectionOptions
from ledger.areas.observations import events, projection, tables
from ledger.log.projector import Projector


def _projectors(options: ProjectionOptions) -> list[Projector]:
    return projection.projectors(check_templates=options.check_templates)


def _routers() -> list[APIRouter]:
    from ledger.areas.observations import routes

    return [routes.router]


def _register_cli(main: click.Group) -> None:
    from ledger.areas.observations import cli

    cli.register(main)


AREA = Area(
    name="observations",
    event_types=events.EVENT_TYPES,
    tables=(
        tables.observation_calls,
        tables.observation_records,
        tables.observation_tool_calls,
        tables.observation_gaps,
    ),
    projectors=_projectors,
    routers=_routers,
    register_cli=_register_cli,
)
