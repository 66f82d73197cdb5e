"""The one list of areas the app is built from, and what the composition root derives from it.

Order matters: projectors run for each event, and flush at the end of a command, in area order.
The kernel's ``rollouts`` comes first (every area reads it). The write side's projectors all run
before any view: a view (the observations' records, recomputed from the capture projection)
reads write-side rows, which the log's followers find already written up to the head.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import MetaData, Table

from ledger.app.area import Area, ProjectionOptions
from ledger.app.core_area import CORE
from ledger.areas.captures.area import AREA as CAPTURES
from ledger.areas.evidence.area import AREA as EVIDENCE
from ledger.areas.health.area import AREA as HEALTH
from ledger.areas.lineage.area import AREA as LINEAGE
from ledger.areas.observations.area import AREA as OBSERVATIONS
from ledger.areas.proxy.area import AREA as PROXY
from ledger.areas.runs.area import AREA as RUNS
from ledger.areas.viewer.area import AREA as VIEWER
from ledger.log.events import Catalogue, EventType
from ledger.log.metadata import NAMING_CONVENTION, metadata
from ledger.log.projection_follower import ProjectionFollower
from ledger.log.projector import Projector
from ledger.log.store import LedgerStore
from ledger.log.view_builds import FIRST_BUILD
from ledger.mirror.base import MirrorArea


def areas() -> list[Area]:
    return [CORE, CAPTURES, LINEAGE, OBSERVATIONS, RUNS, EVIDENCE, HEALTH, PROXY, VIEWER]


def default_catalogue(extra: list[EventType] | None = None) -> Catalogue:
    """Every area's event kinds (plus ``extra``, for tests and benchmarks)."""
    return Catalogue([*(t for area in areas() for t in area.event_types), *(extra or [])])


def write_side_projectors() -> list[Projector]:
    """The projections the append keeps current in its own transaction (commands read them)."""
    options = ProjectionOptions()
    return [p for area in areas() for p in area.projectors(options)]


def view_projectors(build: int | None = None, *, check_templates: bool = False) -> list[Projector]:
    """The projections that follow the log (log/projection_follower.py), in area order, on
    the tables of ``build`` (log/view_builds.py; None: the stable tables, as in a scratch file).
    ``check_templates=True`` (``ledger verify``) makes the observations projection also rebuild
    every capture-only record in full and keep its template only if it gives the same record
    (areas/observations/record_pieces.py)."""
    options = ProjectionOptions(check_templates=check_templates, build=build)
    return [p for area in areas() for p in area.views(options)]


def derived_from_views() -> list[Table]:
    """The areas' tables computed from the views' rows (``Area.derived_from_views``)."""
    return [table for area in areas() for table in area.derived_from_views]


def views_follower(
    store: LedgerStore, *, check_templates: bool = False, **options: Any
) -> ProjectionFollower:
    """The follower that keeps every view current (log/projection_follower.py), emptying the
    tables computed from the views when an upgrade's build of them is swapped in."""
    return ProjectionFollower(
        store,
        functools.partial(view_projectors, check_templates=check_templates),
        derived=derived_from_views(),
        **options,
    )


def default_projectors(*, check_templates: bool = False) -> list[Projector]:
    """Every projection, the write side's then the views: what ``ledger verify`` and a
    rebuild replay from seq 0."""
    return [*write_side_projectors(), *view_projectors(check_templates=check_templates)]


def default_mirror_areas() -> list[MirrorArea]:
    """The mirror's areas, in the order the follower applies each event to them."""
    return [m for area in areas() for m in area.mirror_areas()]


def migrated_schema() -> MetaData:
    """What the revisions create, for alembic to compare: every area's tables, the views' as
    tables of their first build (log/view_builds.py), whose stable names are SQL views."""
    stable = {table.name for view in view_projectors() for table in view.tables}
    schema = MetaData(naming_convention=NAMING_CONVENTION)
    for table in schema_metadata().tables.values():
        if table.name not in stable:
            table.to_metadata(schema)
    for view in view_projectors(FIRST_BUILD):
        for table in view.tables:
            table.to_metadata(schema)
    return schema


def schema_metadata() -> MetaData:
    """The shared metadata with every area's tables on it (what alembic compares)."""
    for area in areas():
        for table in area.tables:
            assert table.metadata is metadata, f"{area.name}: {table.name} is on other metadata"
    return metadata
