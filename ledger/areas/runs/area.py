"""The runs area (run labels), as the composition root sees it: one event kind and the
``run_labels`` projection. Its surfaces are the ``run`` parameter of the ingest routes and of
the health selections, which those areas declare."""

from __future__ import annotations

from ledger.app.area import Area, ProjectionOptions
from ledger.areas.runs import events, projection
from ledger.areas.runs.tables import run_labels
from ledger.log.projector import Projector


def _projectors(options: ProjectionOptions) -> list[Projector]:
    return projection.projectors()


AREA = Area(
    name="runs",
    event_types=events.EVENT_TYPES,
    tables=(run_labels,),
    projectors=_projectors,
)
