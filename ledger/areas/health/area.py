"""The health area (Gym's rollout health checks and perf summary), as the composition root
sees it. It reads the observations area's records; it has no events or tables of its own."""

from __future__ import annotations

import click
from fastapi import APIRouter

from ledger.app.area import Area


def _routers() -> list[APIRouter]:
    from ledger.areas.health import routes

    return [routes.router]


def _register_cli(main: click.Group) -> None:
    from ledger.areas.health import cli

    cli.register(main)


AREA = Area(name="health", routers=_routers, register_cli=_register_cli)
