"""The viewer area, as the composition root sees it: routes only (no events, no tables)."""

from __future__ import annotations

from ledger.app.area import Area

AREA = Area(
    name="viewer",
    route_modules=("ledger.areas.viewer.routes",),
)
