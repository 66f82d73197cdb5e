"""The lineage area (ledger rows, manifests, fences, retire/delete), as the composition root
sees it."""

from __future__ import annotations

from ledger.app.area import Area, ProjectionOptions
from ledger.areas.lineage import events, projection, tables
from ledger.log.projector import Projector


def _projectors(options: ProjectionOptions) -> list[Projector]:
    return projection.projectors()


AREA = Area(
    name="lineage",
    event_types=events.EVENT_TYPES,
    tables=(tables.lineage_rows, tables.lineage_discarded, tables.lineage_removal_hold),
    projectors=_projectors,
    mirror_module="ledger.areas.lineage.mirror",
    route_modules=("ledger.areas.lineage.routes",),
    cli_module="ledger.areas.lineage.cli",
)
