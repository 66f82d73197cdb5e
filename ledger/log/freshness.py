"""The freshness rule of reads over the views (docs/architecture.md, "Freshness").

A read of one rollout's derived documents reflects every event of that rollout acknowledged
before the read began: it waits until the views reach the rollout's last seq (``rollouts`` is
the write side's, current at every acknowledgement), up to ``bound_s``, and past it fails with
``ViewsBehind`` (503, ``Retry-After``). A run-level read answers from what is projected and says
how far that is; a client that needs more asks for ``min_seq``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from sqlalchemy import Connection, select

from ledger.log.commit_signal import CommitSignal
from ledger.log.errors import Conflict, ViewsBehind
from ledger.log.projection_follower import Progress, read_status
from ledger.log.store import LedgerStore
from ledger.log.tables import rollouts
from ledger.log.view_checkpoints import projected_seq

# Between two looks at the checkpoint when no follower in this process says it moved (the
# projector runs in a process of its own): short, a look is one indexed read.
POLL_S = 0.005
MAX_POLL_S = 0.05


def rollout_last_seq(conn: Connection, rollout_id: str) -> int:
    value = conn.execute(
        select(rollouts.c.last_seq).where(rollouts.c.rollout_id == rollout_id)
    ).scalar()
    return int(value or 0)


class Freshness:
    def __init__(
        self,
        store: LedgerStore,
        views: Sequence[str],
        *,
        bound_s: float,
        moved: CommitSignal | None = None,
        ask: Callable[[], None] | None = None,
        waits: bool = True,
    ) -> None:
        self._store = store
        self._views = tuple(views)
        self.bound_s = bound_s
        # False where nothing moves the views (a server of reads only): a rollout's read then
        # answers with what they hold rather than wait for nothing.
        self._waits = waits
        # The follower's signal when it runs in this process: a wait then wakes when it moves.
        self._moved = moved
        # Asks whoever keeps the views current (the follower here, or the projector process)
        # to look at the log now: it otherwise looks every so often (projection_follower.py).
        self._ask = ask

    def projected_in(self, conn: Connection) -> int:
        """The seq every view has reached, read in ``conn``'s snapshot."""
        return projected_seq(conn, self._views)

    async def progress(self) -> Progress:
        """The views' seq, the head, and a failure or rebuild of the views, in one snapshot."""
        return await self._store.read_sync(lambda conn: read_status(conn, self._views))

    async def projected(self) -> int:
        """The seq every view has reached."""
        return await self._store.read_sync(self.projected_in)

    async def wait_for_seq(self, seq: int) -> int:
        """Wait until the views reach ``seq``; the seq they reached. ``ViewsBehind`` past the
        bound, or at once when a view cannot apply an event at or before ``seq``."""
        deadline = time.monotonic() + self.bound_s
        poll = POLL_S
        progress = await self.progress()
        reached, head = progress.projected, progress.head
        if seq > head:
            # Acknowledged means committed: a seq no snapshot holds is no append's yet.
            raise Conflict(f"min_seq {seq} is beyond the log's head ({head}): no event has it")
        failing = progress.failing
        while True:
            if reached >= seq:
                return reached
            if failing is not None and failing.seq <= seq:
                # No wait brings the views past an event they cannot apply.
                raise ViewsBehind(
                    f"the views have reached seq {reached}, not yet {seq}: "
                    f"{failing.describe()}; retry later"
                )
            left = deadline - time.monotonic()
            if left <= 0 or not self._waits:
                # A failure recorded while this read waited names itself.
                status = await self.progress()
                failing = status.failing
                why = "the projector is behind or not running"
                if failing is not None and failing.seq <= seq:
                    why = failing.describe()
                elif status.building is not None:
                    why = (
                        f"an upgrade is building the views beside the live ones (seq "
                        f"{status.building.seq} of {status.head}); the live views answer as of "
                        f"seq {status.projected} until it is swapped in"
                    )
                raise ViewsBehind(
                    f"the views have reached seq {reached}, not yet {seq}, after "
                    f"{self.bound_s:g} s: {why}; retry later"
                )
            if self._ask is not None:
                self._ask()
            if self._moved is not None:
                await self._moved.wait(min(left, MAX_POLL_S))
            else:
                await asyncio.sleep(min(left, poll))
                poll = min(poll * 2, MAX_POLL_S)
            reached = await self.projected()

    async def wait_for_rollout(self, rollout_id: str) -> None:
        """Wait until the views reflect every event of ``rollout_id`` acknowledged so far."""

        def look(conn: Connection) -> tuple[int, int]:
            return rollout_last_seq(conn, rollout_id), projected_seq(conn, self._views)

        last, reached = await self._store.read_sync(look)
        if last > reached and self._waits:
            await self.wait_for_seq(last)
