"""The kernel's own area: rollout events and state, the event log and the operations routes.

Its commands (serve, db, verify, sql, events, import, mirror) span every area; the CLI's main
group adds them itself (ledger/app/cli/main.py).
"""

from __future__ import annotations

from ledger.app.area import Area, ProjectionOptions
from ledger.log import compaction, rollout_events
from ledger.log.projection_versions import projection_versions
from ledger.log.projector import Projector
from ledger.log.rollouts_projection import RolloutsProjector
from ledger.log.tables import events, log_identity, rollouts
from ledger.log.view_builds import view_builds
from ledger.log.view_checkpoints import view_checkpoints
from ledger.log.view_failures import view_failures
from ledger.mirror.tables import mirror_checkpoints


def _projectors(options: ProjectionOptions) -> list[Projector]:
    return [RolloutsProjector()]


CORE = Area(
    name="core",
    event_types=[*rollout_events.EVENT_TYPES, *compaction.EVENT_TYPES],
    tables=(
        events,
        rollouts,
        log_identity,
        mirror_checkpoints,
        projection_versions,
        view_checkpoints,
        view_builds,
        view_failures,
    ),
    projectors=_projectors,
    route_modules=(
        "ledger.app.http.health",
        "ledger.app.http.events",
        "ledger.app.http.rollouts",
        "ledger.app.http.checkpoints",
    ),
)
