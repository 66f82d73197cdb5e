"""The lineage area (ledger rows, manifests, fences, retire/delete), as the composition root
sees it."""

from __future__ import annotations

import click
from fastapi import APIRouter

from ledger.app.area import Area, ProjectionOptions
from ledger.areas.lineage import events, projection, tables
from ledger.log.projector import Projector
from ledger.mirror.base import MirrorArea


def _projectors(options: ProjectionOptions) -> list[Projector]:
    return projection.projectors()


def _routers() -> list[APIRouter]:
    from ledger.areas.lineage import routes

    return [routes.router]


def _register_cli(main: click.Group) -> None:
    from ledger.areas.lineage import cli

    cli.register(main)


def _mirror_areas() -> list[MirrorArea]:
    from ledger.areas.lineage import mirror

    return mirror.areas()


AREA = Area(
    name="lineage",
    event_types=events.EVENT_TYPES,
    tables=(tables.lineage_rows, tables.lineage_discarded, tables.lineage_removal_hold),
    projectors=_projectors,
    mirror_areas=_mirror_areas,
    routers=_routers,
    register_cli=_register_cli,
)
