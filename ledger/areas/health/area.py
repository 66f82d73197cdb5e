"""The health area (Gym's rollout health checks and perf summary), as the composition root
sees it. It reads the observations area's records; it has no events, and one table of derived
state (``health_findings``, kept by its follower, not a projection)."""

from __future__ import annotations

from ledger.app.area import Area
from ledger.areas.health.tables import health_findings

AREA = Area(
    name="health",
    tables=(health_findings,),
    # Checked from the observations records: an upgrade that rebuilds them empties it.
    derived_from_views=(health_findings,),
    route_modules=("ledger.areas.health.routes",),
    cli_module="ledger.areas.health.cli",
)
