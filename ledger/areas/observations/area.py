"""The observations area (bundles, results, the enriched record), as the composition root
sees it."""

from __future__ import annotations

from ledger.app.area import Area, ProjectionOptions
from ledger.areas.observations import events, projection, tables
from ledger.log.projector import Projector


def _views(options: ProjectionOptions) -> list[Projector]:
    return projection.projectors(check_templates=options.check_templates, build=options.build)


AREA = Area(
    name="observations",
    event_types=events.EVENT_TYPES,
    tables=(
        tables.observation_calls,
        tables.observation_records,
        tables.observation_tool_calls,
        tables.observation_gaps,
    ),
    views=_views,
    route_modules=("ledger.areas.observations.routes",),
    cli_module="ledger.areas.observations.cli",
)
