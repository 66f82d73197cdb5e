"""Benchmark databases built once and kept under ``bench-data/`` (ignored by git)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ledger.log import migrate


def cached_database(
    stem: str, what: str, build: Callable[[str], Coroutine[Any, Any, None]]
) -> Path:
    """``bench-data/<stem>-<head revision>.db``, built by ``build(url)`` if absent. Keyed by the
    schema head: a database built by an older schema is not reused. It is built under another
    name and renamed when complete, so an interrupted build is never taken for a cached one."""
    cache = Path("bench-data") / f"{stem}-{migrate.head_revision()}.db"
    if cache.exists():
        return cache
    cache.parent.mkdir(exist_ok=True)
    building = cache.with_suffix(".building")
    for stale in cache.parent.glob(building.name + "*"):
        stale.unlink()
    print(f"building the {what} (cached in {cache})")
    asyncio.run(build(f"sqlite+aiosqlite:///{building.resolve()}"))
    building.rename(cache)
    return cache
