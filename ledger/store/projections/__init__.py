"""Projections: tables that are pure functions of the event log, kept in the append transaction."""

from ledger.store.projections import captures, lineage, observations
from ledger.store.projections.base import Projector
from ledger.store.projections.rollouts import RolloutsProjector


def default_projectors() -> list[Projector]:
    """Every projection, in the order they run for each event (rollouts first: others read it).

    Observations come after captures: its views are recomputed from the capture projection.
    """
    return [
        RolloutsProjector(),
        *captures.projectors(),
        *lineage.projectors(),
        *observations.projectors(),
    ]


__all__ = ["Projector", "RolloutsProjector", "default_projectors"]
