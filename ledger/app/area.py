"""What an area hands the composition root: one value, so a new area touches one list.

An area (captures, lineage, observations, ...) keeps its events, tables, projection, service,
routes, mirror part, importer, CLI and client in its own package and describes them here. The
app is built from ``ledger.app.areas.areas()``: the event catalogue, the write side's projectors
and the views that follow the log, the schema alembic compares, the mirror follower's areas, the
HTTP routers and the CLI.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Table

from ledger.log.events import EventType
from ledger.log.projector import Projector

if TYPE_CHECKING:
    # Named for the types only: the projector process, the CLI and migrations list the areas
    # too, and must not import the web framework (a projector's start is mostly imports).
    import click
    from fastapi import APIRouter

    from ledger.app.http.front import FrontRoute
    from ledger.mirror.base import MirrorArea


@dataclass(frozen=True)
class ProjectionOptions:
    """How the projectors are built: ``check_templates`` for ``ledger verify`` (an area may
    then check what it stored in a cheaper form against a full rebuild); ``build``, the build
    whose tables a view writes (log/view_builds.py; None: the stable tables, a scratch file's)."""

    check_templates: bool = False
    build: int | None = None


def _no_projectors(options: ProjectionOptions) -> list[Projector]:
    return []


@dataclass(frozen=True)
class Area:
    name: str
    event_types: Sequence[EventType] = ()
    # Its tables (on the shared metadata): listed so the schema alembic compares is built from
    # the areas, not from a registry of its own.
    tables: Sequence[Table] = ()
    # The write side's projections: the state its commands decide against, updated in the
    # append's transaction (a command reads them through ``tx``).
    projectors: Callable[[ProjectionOptions], list[Projector]] = _no_projectors
    # The read side's projections: views no command reads, which follow the log from a
    # checkpoint (log/projection_follower.py), behind the acknowledgement.
    views: Callable[[ProjectionOptions], list[Projector]] = _no_projectors
    # Tables computed from the views' rows by a follower of the area's own, not a projection
    # (the health findings): emptied with the views when an upgrade rebuilds them, so they are
    # computed again from the rebuilt rows (log/rebuild.py).
    derived_from_views: Sequence[Table] = ()
    # The surfaces, by module name, imported when the app, the CLI or the mirror is built and
    # not when the area is listed: a migration or a store needs the events and tables only,
    # and a route or a command may import the composition root itself. A routes module has a
    # ``router`` (or ``build_router()``, for a router with state of its own per app), a CLI
    # module ``register(main)``, a mirror module ``areas()``.
    route_modules: Sequence[str] = ()
    cli_module: str | None = None
    mirror_module: str | None = None
    # A module with ``front_routes()``: routes served before the app's middleware and router
    # (ledger/app/http/front.py), for a hot path that bounds and times its own body reads.
    front_module: str | None = None

    def routers(self) -> list[APIRouter]:
        from fastapi import APIRouter  # here: only the app builds routers

        routers = []
        for name in self.route_modules:
            module = importlib.import_module(name)
            build = getattr(module, "build_router", None)
            router = build() if build is not None else module.router
            if not isinstance(router, APIRouter):
                raise TypeError(f"{name}.router is not an APIRouter")
            routers.append(router)
        return routers

    def front_routes(self) -> list[FrontRoute]:
        if self.front_module is None:
            return []
        routes: list[FrontRoute] = importlib.import_module(self.front_module).front_routes()
        return routes

    def register_cli(self, main: click.Group) -> None:
        if self.cli_module is not None:
            importlib.import_module(self.cli_module).register(main)

    def mirror_areas(self) -> list[MirrorArea]:
        if self.mirror_module is None:
            return []
        areas: list[MirrorArea] = importlib.import_module(self.mirror_module).areas()
        return areas
