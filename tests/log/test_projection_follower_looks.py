"""The views' follower looks at the log every so often, and at once when a reader waiting for
the views asks: a trickle of appends costs a step a look, not a step an append, and no read
waits for the next look."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ledger.app.areas import view_projectors, views_follower
from ledger.areas.captures.service import CaptureService
from ledger.log.errors import ViewsBehind
from ledger.log.freshness import Freshness
from ledger.log.store import LedgerStore
from tests.support.exchanges import chat_exchange

# Far longer than any test waits: a look in these tests comes only from a reader's request.
LOOK_EVERY_S = 600.0


def _freshness(store: LedgerStore, *, bound_s: float, ask: Callable[[], None] | None) -> Freshness:
    names = [view.name for view in view_projectors()]
    return Freshness(store, names, bound_s=bound_s, ask=ask)


async def test_a_waiting_reader_asks_the_follower_to_look_at_once(store: LedgerStore) -> None:
    follower = views_follower(store, look_every_s=LOOK_EVERY_S)
    await follower.start()
    try:
        # The follower's first look happened at its start, before anything was appended.
        appended = await CaptureService(store).append("r1", chat_exchange(model_call_id="c1"))
        asking = _freshness(store, bound_s=30.0, ask=follower.look_now)
        assert await asking.wait_for_seq(appended.seq) >= appended.seq
        # A second append, a second request: each wait gets its own look.
        again = await CaptureService(store).append("r1", chat_exchange(model_call_id="c2"))
        assert await asking.wait_for_seq(again.seq) >= again.seq
    finally:
        await follower.stop()


async def test_a_reader_that_does_not_ask_waits_for_the_next_look(store: LedgerStore) -> None:
    """The control: the same wait with no request runs out its bound."""
    follower = views_follower(store, look_every_s=LOOK_EVERY_S)
    await follower.start()
    try:
        # Caught up once (by asking), so the follower now waits for its next look.
        first = await CaptureService(store).append("r1", chat_exchange(model_call_id="c1"))
        await _freshness(store, bound_s=30.0, ask=follower.look_now).wait_for_seq(first.seq)
        appended = await CaptureService(store).append("r1", chat_exchange(model_call_id="c2"))
        silent = _freshness(store, bound_s=0.5, ask=None)
        with pytest.raises(ViewsBehind):
            await silent.wait_for_seq(appended.seq)
    finally:
        await follower.stop()
