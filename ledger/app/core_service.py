"""The core service: the event log and rollout state."""

from __future__ import annotations

from ledger.gym.ids import validate_rollout_id
from ledger.log.errors import NotFound
from ledger.log.records import RolloutState, StoredEvent
from ledger.log.store import LedgerStore


class CoreService:
    def __init__(self, store: LedgerStore, *, events_page_max: int) -> None:
        self._store = store
        self.events_page_max = events_page_max

    async def rollout(self, rollout_id: str) -> RolloutState:
        validate_rollout_id(rollout_id)
        state = await self._store.rollout(rollout_id)
        if state is None:
            raise NotFound(f"rollout {rollout_id!r} has never been seen")
        return state

    async def events(
        self, *, after: int, limit: int, rollout_id: str | None = None
    ) -> list[StoredEvent]:
        if rollout_id is not None:
            validate_rollout_id(rollout_id)
        return await self._store.events(
            after=after, limit=min(limit, self.events_page_max), rollout_id=rollout_id
        )

    async def head_seq(self) -> int:
        return await self._store.head_seq()
