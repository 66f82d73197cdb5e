"""The viewer area, as the composition root sees it: routes, and one index on ``rollouts``
(no events, no tables of its own)."""

from __future__ import annotations

from ledger.app.area import Area

# Imported for its effect: the index joins the kernel's table on the shared metadata, so the
# schema alembic compares (built from the areas) has it.
from ledger.areas.viewer import tables  # noqa: F401

AREA = Area(
    name="viewer",
    route_modules=("ledger.areas.viewer.routes",),
)
