"""Replaying stored events into projectors on a scratch SQLite database (``ledger verify``).

A replay decodes every event of the log once and hands it to the projectors that handle its
kind; its cost per event decides how fast verify is, so the hot path avoids what costs more
than the work: attribute access on SQLAlchemy rows (a lookup by name each), the catalogue
lookups per event, and a second derivation of a payload that two areas' projectors share
(``EventType.derive``, done once here as the writer's callers do it once before appending).

The scratch database is a throwaway rebuilt from seq 0 on every run: it is written without a
rollback journal or fsyncs and with a large page cache. It stands in for the log too: a view
may read the payloads of the events it applies (the observations view takes a call's payloads
from its event instead of copying them), so a replay into the scratch copies each page's seqs
and payloads into its ``events`` table before applying them (``copy_events``): what a view may
read of an event, without the log's other columns and indexes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Row, Table, create_engine, event, select

from ledger.log.canonical import parse_json
from ledger.log.engines import sqlite_url
from ledger.log.events import Catalogue, Derivation, EventType
from ledger.log.metadata import metadata
from ledger.log.projector import Projector, apply_events
from ledger.log.records import StoredEvent, as_utc
from ledger.log.tables import events

# Scratch pragmas: no journal and no fsync (a crash loses nothing, the scratch is rebuilt), an
# exclusive lock (no other connection), temporary b-trees in memory and 256 MiB of page cache.
_SCRATCH_PRAGMAS = (
    "PRAGMA journal_mode=OFF",
    "PRAGMA synchronous=OFF",
    "PRAGMA locking_mode=EXCLUSIVE",
    "PRAGMA temp_store=MEMORY",
    "PRAGMA cache_size=-262144",
)


def _set_scratch_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        for pragma in _SCRATCH_PRAGMAS:
            cursor.execute(pragma)
    finally:
        cursor.close()


@contextmanager
def scratch_database(directory: Path, tables: Sequence[Table]) -> Iterator[Engine]:
    """An empty SQLite file in ``directory`` with ``tables`` and the events' seqs and payloads
    created, for one replay."""
    engine = create_engine(sqlite_url(directory / "scratch.db", driver="sqlite+pysqlite"))
    event.listen(engine, "connect", _set_scratch_pragmas)
    try:
        metadata.create_all(engine, tables=list(tables))
        with engine.begin() as conn:
            conn.exec_driver_sql(_SCRATCH_EVENTS)
        yield engine
    finally:
        engine.dispose()


# Where a ``select(events)`` row holds the seq and the payload.
_SEQ_AT = list(events.columns.keys()).index("seq")
_PAYLOAD_AT = list(events.columns.keys()).index("payload")
_SCRATCH_EVENTS = "CREATE TABLE events (seq INTEGER PRIMARY KEY, payload TEXT)"
_COPY_EVENT = "INSERT INTO events (seq, payload) VALUES (?, ?)"


class _Kind:
    """What decoding an event of one kind needs, looked up once per kind."""

    __slots__ = ("derive", "name", "version")

    def __init__(self, event_type: EventType) -> None:
        self.name = event_type.kind
        self.version = event_type.version
        self.derive: Derivation | None = event_type.derive


class EventDecoder:
    """Stored rows to the events ``transaction.row_to_event`` makes of them (payload decoded
    and upcast to the kind's current version), with ``derived`` set by the kind's
    ``EventType.derive`` as the writer's callers set it."""

    def __init__(self, catalogue: Catalogue) -> None:
        self._catalogue = catalogue
        self._kinds: dict[str, _Kind] = {}

    def _kind(self, name: str) -> _Kind:
        kind = self._kinds.get(name)
        if kind is None:
            kind = self._kinds[name] = _Kind(self._catalogue.get(name))
        return kind

    def __call__(self, row: Row[Any] | Sequence[Any]) -> StoredEvent:
        # A ``select(events)`` row, unpacked by position: a Row's attributes are looked up by
        # name, which cost more than the rest of the decoding but the payload's parse.
        (
            seq,
            recorded_at,
            kind_name,
            schema_version,
            rollout_id,
            generation,
            idempotency_key,
            text,
            payload_sha256,
            hash_,
        ) = row
        kind = self._kind(kind_name)
        payload: dict[str, Any] | None = None
        derived: object = None
        if text is not None:
            payload = parse_json(text)
            if schema_version != kind.version:
                payload = self._catalogue.upcast(kind_name, schema_version, payload)
            if kind.derive is not None:
                derived = kind.derive(payload)
        return StoredEvent(
            seq=seq,
            recorded_at=as_utc(recorded_at),
            kind=kind_name,
            schema_version=kind.version,
            rollout_id=rollout_id,
            generation=generation,
            idempotency_key=idempotency_key,
            payload=payload,
            payload_sha256=payload_sha256,
            hash=hash_,
            derived=derived,
        )


class Replay:
    """Applies pages of stored events to ``projectors`` on ``conn``, then flushes each
    projector once per page (by the projector contract a flush after any run of events gives
    the same rows).

    Each projector gets the page's events of the kinds it handles, in area order: at once
    through ``apply_many`` when it has one (``AppliesMany``), else one ``apply`` each.
    ``per_event=True`` is the reference order instead, the writer's: every event to each
    projector in turn, by ``apply`` only (tests compare both).
    """

    def __init__(
        self,
        conn: Connection,
        catalogue: Catalogue,
        projectors: Sequence[Projector],
        *,
        per_event: bool = False,
        copy_events: bool = False,
    ) -> None:
        self.conn = conn
        self.copy_events = copy_events
        self.projectors = projectors
        self.decode = EventDecoder(catalogue)
        self.per_event = per_event
        self.last_seq = 0
        self.events = 0
        self._handlers: dict[str, tuple[Projector, ...]] = {}

    def _handling(self, kind: str) -> tuple[Projector, ...]:
        handlers = self._handlers.get(kind)
        if handlers is None:
            handlers = self._handlers[kind] = tuple(
                projector for projector in self.projectors if projector.handles(kind)
            )
        return handlers

    def apply_page(self, rows: Sequence[Row[Any]]) -> None:
        """Apply ``select(events)`` rows (copied into ``conn``'s ``events`` first when
        ``copy_events``: a scratch database)."""
        if not rows:
            return
        if self.copy_events:
            self.conn.exec_driver_sql(
                _COPY_EVENT, [(row[_SEQ_AT], row[_PAYLOAD_AT]) for row in rows]
            )
        self.apply_decoded([self.decode(row) for row in rows])

    def apply_decoded(self, decoded: Sequence[StoredEvent]) -> None:
        """``apply_page`` of events an ``EventDecoder`` already made of the rows (the
        projection follower decodes a page before it takes the write lock)."""
        if not decoded:
            return
        if self.per_event:
            self._apply_each(decoded)
        else:
            apply_events(self.conn, self.projectors, decoded)
        self.last_seq = decoded[-1].seq
        self.events += len(decoded)
        for projector in self.projectors:
            projector.flush(self.conn)

    def _apply_each(self, decoded: Sequence[StoredEvent]) -> None:
        conn, handling = self.conn, self._handling
        for stored in decoded:
            for projector in handling(stored.kind):
                projector.apply(conn, stored)


def pages_of(conn: Connection, *, page: int = 2000) -> Iterator[list[Row[Any]]]:
    """Every event row in seq order, a page at a time, through one synchronous connection
    (``ledger db upgrade`` rebuilding projections inside its write transaction)."""
    after = 0
    query = select(events).order_by(events.c.seq)
    while rows := list(conn.execute(query.where(events.c.seq > after).limit(page)).all()):
        yield rows
        after = rows[-1].seq
