"""What an area hands the composition root: one value, so a new area touches one list.

An area (captures, lineage, observations, ...) keeps its events, tables, projection, service,
routes, mirror part, importer, CLI and client in its own package and describes them here. The
app is built from ``ledger.app.areas.areas()``: the event catalogue, the projector list (and so
the schema alembic compares), the mirror follower's areas, the HTTP routers and the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import click
from fastapi import APIRouter
from sqlalchemy import Table

from ledger.log.events import EventType
from ledger.log.projector import Projector
from ledger.mirror.base import MirrorArea


@dataclass(frozen=True)
class ProjectionOptions:
    """How the projectors are built: ``check_templates`` for ``ledger verify`` (an area may
    then check what it stored in a cheaper form against a full rebuild)."""

    check_templates: bool = False


def _no_projectors(options: ProjectionOptions) -> list[Projector]:
    return []


def _no_mirror_areas() -> list[MirrorArea]:
    return []


def _no_commands(main: click.Group) -> None:
    return None


def _no_routers() -> list[APIRouter]:
    return []


@dataclass(frozen=True)
class Area:
    name: str
    event_types: Sequence[EventType] = ()
    # Its tables (on the shared metadata): listed so the schema alembic compares is built from
    # the areas, not from a registry of its own.
    tables: Sequence[Table] = ()
    projectors: Callable[[ProjectionOptions], list[Projector]] = _no_projectors
    mirror_areas: Callable[[], list[MirrorArea]] = _no_mirror_areas
    # The surfaces are loaded when the app or the CLI is built, not when the area is listed:
    # a migration or a store needs the events and tables only, and a route or a command may
    # import the composition root itself.
    routers: Callable[[], list[APIRouter]] = _no_routers
    register_cli: Callable[[click.Group], None] = _no_commands
