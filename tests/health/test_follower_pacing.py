"""The health follower's pace: caught up, it waits a poll between steps even when the last step
found changes (a record is read and checked whole, so a rollout gaining a call at every capture
is checked once a poll, not once a capture), and longer after a long step (its CPU share stays
bounded as the records grow); a full page means it is behind and goes on at once.
"""

from __future__ import annotations

from typing import cast

from ledger.areas.health.follower import (
    IDLE_PER_WORK,
    HealthFollower,
    SettledHead,
    pause_after,
)
from ledger.log.store import LedgerStore

POLL = 0.5


class ScriptedFollower(HealthFollower):
    """Steps that check the given numbers of records; pauses and steps are logged, not run."""

    def __init__(self, pages: list[int]) -> None:
        super().__init__(cast(LedgerStore, object()), page_size=3, poll_seconds=POLL)
        self.pages = pages
        self.log: list[tuple[str, float]] = []

    async def step(self, upto_seq: int | None = None) -> int:
        checked = self.pages.pop(0)
        if not self.pages:
            self._stopping.set()
        self.log.append(("step", checked))
        return checked

    async def report(self) -> None:
        pass

    async def _building(self) -> bool:
        return False  # no build of the views runs beside the live ones

    async def _pause(self, seconds: float) -> None:
        self.log.append(("pause", seconds))


async def test_it_waits_a_poll_after_every_step_short_of_a_full_page() -> None:
    follower = ScriptedFollower([3, 3, 1, 2, 0])
    await follower._run()
    assert follower.log == [
        ("step", 3),
        ("step", 3),
        ("step", 1),
        ("pause", POLL),
        ("step", 2),
        ("pause", POLL),
        ("step", 0),
        ("pause", POLL),
    ]


def test_a_long_step_is_followed_by_a_pause_in_proportion() -> None:
    assert pause_after(1, 0.01, page_size=3, poll_seconds=POLL) == POLL
    assert pause_after(2, 1.0, page_size=3, poll_seconds=POLL) == 1.0 * IDLE_PER_WORK
    assert IDLE_PER_WORK >= 1  # the follower works at most half the time
    # Behind (a full page): no pause, however long the step took.
    assert pause_after(3, 1.0, page_size=3, poll_seconds=POLL) == 0.0


def test_the_settled_head_is_the_newest_head_read_a_settle_ago() -> None:
    heads = SettledHead(settle_seconds=1.0)
    assert heads.settled(now=0.0) == 0  # nothing read yet
    heads.observe(10.0, 5)
    assert heads.settled(now=10.5) == 0  # read, but not a settle ago
    heads.observe(10.6, 9)
    heads.observe(11.2, 14)
    assert heads.settled(now=11.0) == 5
    assert heads.settled(now=11.7) == 9  # 10.6 is a settle ago, 11.2 not yet
    assert heads.settled(now=12.2) == 14
    assert heads.settled(now=99.0) == 14  # the newest stays until a newer one is old enough
