"""The writer's memory of ``rollouts`` rows, so an append need not SELECT its rollout's row.

Every append needs its rollout's generation (and commands read the state to decide, e.g. whether
a rollout is fenced). ``rollouts`` is a projection: its rows change only through appends. So the
rows this writer saw or wrote stay true for as long as nobody else appended, which the writer
checks at the start of each batch, inside the write lock: if the chain head is not the one it
committed last (another process or replica appended), the cache starts empty. A command that
fails (savepoint rolled back) or a batch whose commit fails also empties it.
"""

from __future__ import annotations

from ledger.log.records import RolloutState

# Bounded so a long-running writer over many rollouts does not grow without limit; emptying it
# only costs a SELECT per rollout on its next append.
MAX_ENTRIES = 100_000


class RolloutCache:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._rows: dict[str, RolloutState | None] = {}
        self._max_entries = max_entries
        self._committed_head: object = None

    def lookup(self, rollout_id: str) -> tuple[bool, RolloutState | None]:
        """(known, row): a known row may be None (the rollout has never been seen)."""
        if rollout_id in self._rows:
            return True, self._rows[rollout_id]
        return False, None

    def remember(self, rollout_id: str, row: RolloutState | None) -> None:
        if len(self._rows) >= self._max_entries:
            self._rows.clear()
        self._rows[rollout_id] = row

    def forget(self, rollout_id: str) -> None:
        self._rows.pop(rollout_id, None)

    def clear(self) -> None:
        self._rows.clear()
        self._committed_head = None

    def begin(self, head: object) -> None:
        """A batch starts at ``head``: keep the rows only if this writer committed that head."""
        if head != self._committed_head:
            self.clear()

    def committed(self, head: object) -> None:
        self._committed_head = head

    def __len__(self) -> int:
        return len(self._rows)
