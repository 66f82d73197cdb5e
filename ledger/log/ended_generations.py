"""Tombstones applied set-based: the rows of the rollout generations a run of events ended,
removed with one statement per table (and generation), not one per id.

A delete of 4,096 ids appends 4,096 ``rollout.deleted`` events (one ``append_many``); removing
each one's rows as it is applied ran ~10 statements per id. A projector instead notes each
ended generation in an ``EndedGenerations`` and removes them all when the run it applies ends
(the end of its ``apply_many``, or a view's page at ``flush``), and before it applies any other
event, so the rows an event reads or writes never see a removal out of order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

from sqlalchemy import Connection, Table, delete

# Ids per statement: far below SQLite's 32,766 and asyncpg's 32,767 bound parameters.
CHUNK = 8192


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


class EndedGenerations:
    """(rollout id, generation) pairs ended by tombstones and not yet removed, in order."""

    def __init__(self) -> None:
        self._ended: dict[tuple[str, int], None] = {}

    def add(self, rollout_id: str, generation: int) -> None:
        self._ended[(rollout_id, generation)] = None

    def __bool__(self) -> bool:
        return bool(self._ended)

    def take(self) -> list[tuple[str, int]]:
        ended, self._ended = list(self._ended), {}
        return ended

    def clear(self) -> None:
        self._ended = {}


def delete_generations(conn: Connection, table: Table, ended: Sequence[tuple[str, int]]) -> None:
    """Remove the table's rows of these rollout generations (columns ``rollout_id`` and
    ``generation``): one statement per generation among them (nearly always one)."""
    by_generation: dict[int, list[str]] = defaultdict(list)
    for rollout_id, generation in ended:
        by_generation[generation].append(rollout_id)
    for generation, ids in by_generation.items():
        for chunk in _chunks(ids):
            conn.execute(
                delete(table).where(table.c.rollout_id.in_(chunk), table.c.generation == generation)
            )


def delete_rollouts(conn: Connection, table: Table, ended: Sequence[tuple[str, int]]) -> None:
    """Remove the table's rows of these rollouts, whatever their generation."""
    ids = list(dict.fromkeys(rollout_id for rollout_id, _ in ended))
    for chunk in _chunks(ids):
        conn.execute(delete(table).where(table.c.rollout_id.in_(chunk)))
