"""The captures area, as the composition root sees it."""

from __future__ import annotations

import click
from fastapi import APIRouter

from ledger.app.area import Area, ProjectionOptions
from ledger.areas.captures import events, follow_tables, projection, tables
from ledger.log.projector import Projector
from ledger.mirror.base import MirrorArea


def _projectors(options: ProjectionOptions) -> list[Projector]:
    return projection.projectors()


def _routers() -> list[APIRouter]:
    from ledger.areas.captures import routes

    return [routes.router]


def _register_cli(main: click.Group) -> None:
    from ledger.areas.captures import cli

    cli.register(main)


def _mirror_areas() -> list[MirrorArea]:
    from ledger.areas.captures import mirror

    return mirror.areas()


AREA = Area(
    name="captures",
    event_types=events.EVENT_TYPES,
    tables=(
        tables.capture_calls,
        tables.capture_state,
        tables.capture_pending,
        follow_tables.capture_follow_files,
    ),
    projectors=_projectors,
    mirror_areas=_mirror_areas,
    routers=_routers,
    register_cli=_register_cli,
)
