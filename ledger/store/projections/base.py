"""The projector contract."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import Connection, Table

from ledger.store.records import StoredEvent


class Projector(Protocol):
    """Maintains some tables from events. ``apply`` runs inside the append transaction.

    It must be deterministic (no clocks, no randomness beyond the event itself), because
    ``ledger verify`` rebuilds every projection from seq 0 and expects identical rows. It must
    also accept a redacted event (``payload is None``, after compaction of a deleted generation).
    """

    name: str
    tables: tuple[Table, ...]

    def handles(self, kind: str) -> bool: ...

    def apply(self, conn: Connection, event: StoredEvent) -> None: ...
