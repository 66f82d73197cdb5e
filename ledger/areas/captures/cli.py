"""Commands of the captures area."""

from __future__ import annotations

import click


def register(main: click.Group) -> None:
    """Add this area's commands to ``main``."""
