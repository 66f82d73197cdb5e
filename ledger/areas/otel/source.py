"""What the exporter reads: rollouts' current records with their run label and recording
times, picked by a selection (the one-shot export) or by the seq of their last change (the
follower). Synchronous reads, each run whole in one snapshot (``read_sync``)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, and_, func, select

from ledger.areas.health.findings_store import IN_CHUNK, records_by_id
from ledger.areas.health.queries import selected_ids, snapshot
from ledger.areas.health.selection import Selection
from ledger.areas.observations.tables import observation_records
from ledger.areas.otel.mapping import RolloutEvidence
from ledger.areas.runs.tables import run_labels
from ledger.log.canonical import parse_json
from ledger.log.records import as_utc
from ledger.log.tables import events, rollouts
from ledger.mirror.tables import mirror_checkpoints

# The follower's row in mirror_checkpoints: every record whose last change is at or before
# this seq has been taken by the collector.
OTLP_CHECKPOINT = "otlp-export"


@dataclass(frozen=True)
class ChangedRollout:
    evidence: RolloutEvidence
    last_seq: int
    changed_at: datetime  # when the record's last change was recorded


def _query() -> Select[Any]:
    records = observation_records
    return select(
        records.c.rollout_id,
        records.c.generation,
        records.c.last_seq,
        rollouts.c.created_at,
        rollouts.c.updated_at,
        run_labels.c.run_label,
        events.c.recorded_at,
    ).select_from(
        records.join(rollouts, rollouts.c.rollout_id == records.c.rollout_id)
        .join(events, events.c.seq == records.c.last_seq)
        .outerjoin(
            run_labels,
            and_(
                run_labels.c.rollout_id == records.c.rollout_id,
                run_labels.c.generation == records.c.generation,
            ),
        )
    )


def _with_records(conn: Connection, rows: Sequence[Any]) -> list[ChangedRollout]:
    texts = records_by_id(conn, [row.rollout_id for row in rows])
    found = []
    for row in rows:
        text = texts.get(row.rollout_id)
        if text is None:
            continue
        evidence = RolloutEvidence(
            rollout_id=row.rollout_id,
            generation=int(row.generation),
            record=parse_json(text),
            run_label=row.run_label,
            first_recorded=as_utc(row.created_at),
            last_recorded=as_utc(row.updated_at),
        )
        found.append(ChangedRollout(evidence, int(row.last_seq), as_utc(row.recorded_at)))
    return found


def changed_after(
    conn: Connection, *, after_seq: int, limit: int, settled_at: datetime | None = None
) -> list[ChangedRollout]:
    """Rollouts whose record last changed after ``after_seq``, oldest change first; with
    ``settled_at``, only those up to the first changed after it (whose records are then not
    read at all: a rollout being written is read once it pauses, not at every poll)."""
    snapshot(conn)
    query = _query().where(observation_records.c.last_seq > after_seq)
    rows = conn.execute(query.order_by(observation_records.c.last_seq).limit(limit)).all()
    if settled_at is not None:
        rows = list(itertools.takewhile(lambda row: as_utc(row.recorded_at) <= settled_at, rows))
    return _with_records(conn, rows)


def selected_rollout_ids(conn: Connection, selection: Selection) -> list[str]:
    """The selection's rollouts in the order their records last changed."""
    snapshot(conn)
    return selected_ids(conn, selection)


def rollouts_by_id(conn: Connection, rollout_ids: Sequence[str]) -> list[ChangedRollout]:
    """These rollouts (at most IN_CHUNK), in the order given; one without a record is left out."""
    assert len(rollout_ids) <= IN_CHUNK
    snapshot(conn)
    rows = conn.execute(_query().where(observation_records.c.rollout_id.in_(rollout_ids))).all()
    by_id = {row.rollout_id: row for row in rows}
    return _with_records(conn, [by_id[i] for i in rollout_ids if i in by_id])


@dataclass(frozen=True)
class ExportLag:
    """How far the export's saved checkpoint is behind the records, as the database says."""

    rollouts: int
    oldest_unexported: datetime | None

    def seconds(self, now: datetime) -> float:
        if self.oldest_unexported is None:
            return 0.0
        return max(0.0, (now - self.oldest_unexported).total_seconds())


def read_export_lag(conn: Connection) -> ExportLag:
    """From the saved checkpoint, not from a follower: true whatever it is doing (failing
    against an absent collector, or not running in this process)."""
    records = observation_records
    checkpoint = saved_checkpoint_seq(conn)
    behind = conn.execute(
        select(func.count(), func.min(records.c.last_seq)).where(
            records.c.last_seq > (checkpoint or 0)
        )
    ).one()
    oldest = None
    if behind[1] is not None:
        value = conn.execute(select(events.c.recorded_at).where(events.c.seq == behind[1])).scalar()
        oldest = None if value is None else as_utc(value)
    return ExportLag(int(behind[0]), oldest)


def saved_checkpoint_seq(conn: Connection) -> int | None:
    """The export's saved checkpoint; None before its first save."""
    value = conn.execute(
        select(mirror_checkpoints.c.seq).where(mirror_checkpoints.c.name == OTLP_CHECKPOINT)
    ).scalar()
    return None if value is None else int(value)
