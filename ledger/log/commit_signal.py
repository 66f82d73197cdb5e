"""A wake-up for whoever follows the log in the writer's own process: the writer notifies it
after each commit that appended events, so a follower or a reader waiting for the views need not
poll the database to learn that there is something new."""

from __future__ import annotations

import asyncio
import contextlib


class CommitSignal:
    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        # Each notification wakes everyone waiting now; a later wait waits for a later one.
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, seconds: float) -> None:
        """Until the next notification, or ``seconds`` (a commit by another process
        notifies nobody here, so a waiter still looks at the database now and then)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), seconds)
