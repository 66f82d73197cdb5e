"""The evidence area, as the composition root sees it: the intent event kind, the
``call_evidence`` projection (of its own intents and of the lineage and capture areas' events)
and the routes that read it."""

from __future__ import annotations

from ledger.app.area import Area, ProjectionOptions
from ledger.areas.evidence import events, projection
from ledger.areas.evidence.tables import evidence_calls
from ledger.log.projector import Projector


def _projectors(options: ProjectionOptions) -> list[Projector]:
    return projection.projectors()


AREA = Area(
    name="evidence",
    event_types=events.EVENT_TYPES,
    tables=(evidence_calls,),
    projectors=_projectors,
    route_modules=("ledger.areas.evidence.routes",),
)
