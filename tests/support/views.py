"""Waiting for an in-process app's views (the projection follower runs as a task of its own)."""

from __future__ import annotations

from fastapi import FastAPI


async def views_caught_up(app: FastAPI) -> None:
    """Wait until the app's views have applied every event appended so far."""
    ledger = app.state.ledger
    await ledger.freshness.wait_for_seq(await ledger.store.head_seq())
