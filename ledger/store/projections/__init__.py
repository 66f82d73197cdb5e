"""Projections: tables that are pure functions of the event log, kept in the append transaction."""

from ledger.store.projections import captures, lineage, observations
from ledger.store.projections.base import Projector
from ledger.store.projections.rollouts import RolloutsProjector


def default_projectors(*, check_templates: bool = False) -> list[Projector]:
    """Every projection, in the order they run for each event (rollouts first: others read it).

    Observations come after captures: its views are recomputed from the capture projection.
    The order is also the order of ``flush`` at the end of a command, and it matters there:
    rollouts and captures write their deferred rows (``rollouts``, ``capture_state``) in
    ``flush``, and the observations projector's ``flush`` reads those tables by SQL, so both
    must stay before it.

    ``check_templates=True`` (``ledger verify``) makes the observations projection also
    rebuild every capture-only record in full and keep its template only if it gives the same
    record (store/record_pieces.py), so a rebuild checks what the writer stored.
    """
    return [
        RolloutsProjector(),
        *captures.projectors(),
        *lineage.projectors(),
        *observations.projectors(check_templates=check_templates),
    ]


__all__ = ["Projector", "RolloutsProjector", "default_projectors"]
