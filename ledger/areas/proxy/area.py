"""The capture proxy area, as the composition root sees it.

It owns no events or tables: each exchange is appended through the captures service as a
``model_call.captured`` event, so the capture projection, records and mirror are the captures
area's.
"""

from __future__ import annotations

from ledger.app.area import Area

AREA = Area(
    name="proxy",
    route_modules=("ledger.areas.proxy.routes",),
    front_module="ledger.areas.proxy.routes",
)
