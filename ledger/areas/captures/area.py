"""The captures area, as the composition root sees it."""

from __future__ import annotations

from ledger.app.area import Area, ProjectionOptions
from ledger.areas.captures import calls_view, events, follow_tables, projection, tables
from ledger.log.projector import Projector


def _projectors(options: ProjectionOptions) -> list[Projector]:
    return projection.projectors()


def _views(options: ProjectionOptions) -> list[Projector]:
    return [calls_view.CaptureCallsView(options.build)]


AREA = Area(
    name="captures",
    event_types=events.EVENT_TYPES,
    tables=(
        tables.capture_positions,
        tables.capture_state,
        tables.capture_pending,
        tables.capture_calls,
        tables.capture_call_counts,
        follow_tables.capture_follow_files,
    ),
    projectors=_projectors,
    views=_views,
    mirror_module="ledger.areas.captures.mirror",
    route_modules=("ledger.areas.captures.routes",),
)
