"""The capture proxy area, as the composition root sees it.

It owns no events or tables: each exchange is appended through the captures service as a
``model_call.captured`` event, so the capture projection, records and mirror are the captures
area's.
"""

from __future__ import annotations

from fastapi import APIRouter

from ledger.app.area import Area


def _routers() -> list[APIRouter]:
    from ledger.areas.proxy import routes

    return [routes.build_router()]


AREA = Area(name="proxy", routers=_routers)
