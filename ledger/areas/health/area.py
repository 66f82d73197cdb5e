"""The health area (Gym's rollout health checks and perf summary), as the composition root
sees it. It reads the observations area's records; it has no events or tables of its own."""

from __future__ import annotations

from ledger.app.area import Area

AREA = Area(
    name="health",
    route_modules=("ledger.areas.health.routes",),
    cli_module="ledger.areas.health.cli",
)
