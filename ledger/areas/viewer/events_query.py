"""The event log for the live tail: by seq, without payloads (a capture can be megabytes), each
capture event with its call's status (the projected ``capture_calls`` row of that event, found
by ``ix_capture_calls_seq``), optionally only one rollout's events and one kind.

The tail reads the log only as far as the views have projected it (the caller passes that seq):
past it a capture's row may not be written yet, and an event sent without its status would
never be sent again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.captures.tables import capture_calls
from ledger.areas.viewer.rollout_query import call_failed, call_truncated
from ledger.log.tables import events


@dataclass(frozen=True)
class CaptureStatus:
    """A captured call's outcome, as the rollout page's calls table tells it."""

    damaged: bool
    status_code: int | None
    error_category: str | None
    finish_reason: str | None
    response_status: str | None

    @property
    def failed(self) -> bool:
        return call_failed(self.damaged, self.error_category, self.status_code)

    @property
    def truncated(self) -> bool:
        return call_truncated(self.finish_reason, self.response_status)

    def text(self) -> str:
        if self.damaged:
            return "damaged"
        code = str(self.status_code) if self.status_code is not None else "no status"
        if self.failed:
            category = f" ({self.error_category})" if self.error_category else ""
            return f"failed {code}{category}"
        return f"truncated {code}" if self.truncated else code


@dataclass(frozen=True)
class TailEvent:
    seq: int
    recorded_at: datetime
    kind: str
    rollout_id: str | None
    generation: int
    hash: str
    # The capture's status when the event is a capture of the rollout's current generation.
    capture: CaptureStatus | None = None


@dataclass(frozen=True)
class TailFilter:
    rollout_id: str | None = None
    kind: str | None = None


_COLUMNS = (
    events.c.seq,
    events.c.recorded_at,
    events.c.kind,
    events.c.rollout_id,
    events.c.generation,
    events.c.hash,
    capture_calls.c.damaged,
    capture_calls.c.status_code,
    capture_calls.c.error_category,
    capture_calls.c.finish_reason,
    capture_calls.c.response_status,
)


def _select(flt: TailFilter) -> Select[Any]:
    found = select(*_COLUMNS).select_from(
        events.outerjoin(capture_calls, capture_calls.c.seq == events.c.seq)
    )
    conditions: list[ColumnElement[bool]] = []
    if flt.rollout_id is not None:
        conditions.append(events.c.rollout_id == flt.rollout_id)
    if flt.kind is not None:
        conditions.append(events.c.kind == flt.kind)
    return found.where(*conditions)


def _event(row: Any) -> TailEvent:
    capture = None if row.damaged is None else CaptureStatus(*row[6:])
    return TailEvent(
        seq=row.seq,
        recorded_at=row.recorded_at,
        kind=row.kind,
        rollout_id=row.rollout_id,
        generation=row.generation,
        hash=row.hash,
        capture=capture,
    )


async def events_after(
    conn: AsyncConnection,
    after: int,
    limit: int,
    flt: TailFilter | None = None,
    until: int | None = None,
) -> list[TailEvent]:
    """The events after seq ``after`` (up to ``until`` when given), oldest first."""
    wanted = _select(flt or TailFilter()).where(events.c.seq > after)
    if until is not None:
        wanted = wanted.where(events.c.seq <= until)
    found = await conn.execute(wanted.order_by(events.c.seq).limit(limit))
    return [_event(r) for r in found]


async def newest_events(
    conn: AsyncConnection, limit: int, until: int, flt: TailFilter | None = None
) -> list[TailEvent]:
    """The newest ``limit`` events up to seq ``until`` (of the filter's), oldest first."""
    flt = flt or TailFilter()
    # One rollout's events in ix_events_rollout's order (seq grows with generation): no sort.
    order = (
        (events.c.generation.desc(), events.c.seq.desc())
        if flt.rollout_id is not None and flt.kind is None
        else (events.c.seq.desc(),)
    )
    wanted = _select(flt).where(events.c.seq <= until).order_by(*order).limit(limit)
    return [_event(r) for r in await conn.execute(wanted)][::-1]
