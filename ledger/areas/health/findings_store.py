"""SQL of ``health_findings``: reading rows beside the records they were computed from (the
freshness rule), the records the follower has not checked yet, and writing its rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.health.row_figures import stored_columns
from ledger.areas.health.tables import health_findings
from ledger.areas.observations.queries import read_exchanges_sync, read_record_text_sync
from ledger.areas.observations.record_payloads_from_log import filled_record, marked_seqs
from ledger.areas.observations.tables import observation_records
from ledger.gym.health.compact import CompactDigest, compact_digest
from ledger.log.canonical import parse_json

# Ids per ``IN (...)`` list: well inside every backend's parameter limit.
IN_CHUNK = 500
DIGEST_COLUMNS = tuple(CompactDigest.__slots__)
# The stored form's columns, in CompactDigest's field order.
DIGEST_SELECT = tuple(health_findings.c[name] for name in DIGEST_COLUMNS)
# Every column computed from the record: the digest's and the summary's (row_figures.py).
COMPUTED_COLUMNS = (*DIGEST_COLUMNS, "verdict_line", "figures")


def digest_of(row: Sequence[Any], offset: int) -> CompactDigest:
    """The CompactDigest held in ``row[offset:]`` (DIGEST_SELECT's columns)."""
    return CompactDigest(*row[offset : offset + len(DIGEST_COLUMNS)])


@dataclass(frozen=True)
class StoredRecordRow:
    rollout_id: str
    last_seq: int
    text: str


def records_by_id(conn: Connection, rollout_ids: Sequence[str]) -> dict[str, str]:
    """The records of these rollouts as readers get them (templates filled in)."""
    found: dict[str, str] = {}
    for first in range(0, len(rollout_ids), IN_CHUNK):
        chunk = rollout_ids[first : first + IN_CHUNK]
        rows = conn.execute(
            select(
                observation_records.c.rollout_id,
                observation_records.c.record,
                observation_records.c.assembled,
                observation_records.c.payloads_from_log,
            ).where(observation_records.c.rollout_id.in_(chunk))
        )
        from_log: dict[str, str] = {}
        for row in rows.all():
            text = str(row.record)
            if row.assembled:  # a template: its calls' pieces are filled in on read
                text = read_record_text_sync(conn, row.rollout_id) or text
            elif row.payloads_from_log:  # filled below, the chunk's events read at once
                from_log[row.rollout_id] = text
            found[row.rollout_id] = text
        seqs = {seq for text in from_log.values() for seq in marked_seqs(text)}
        exchanges = read_exchanges_sync(conn, seqs) if seqs else {}
        for rollout_id, text in from_log.items():
            found[rollout_id] = filled_record(text, exchanges)
    return found


def newest_record_change(conn: Connection) -> int:
    """The highest ``last_seq`` of any record: how far the records have changed."""
    return int(conn.execute(select(func.max(observation_records.c.last_seq))).scalar() or 0)


def changed_records(
    conn: Connection, *, after_seq: int, limit: int, upto_seq: int | None = None
) -> list[StoredRecordRow]:
    """Records whose latest change is after ``after_seq`` (and at most ``upto_seq``), oldest
    change first. A record's last_seq is the seq of one of its own rollout's events, so no two
    records share one."""
    query = select(observation_records.c.rollout_id, observation_records.c.last_seq).where(
        observation_records.c.last_seq > after_seq
    )
    if upto_seq is not None:
        query = query.where(observation_records.c.last_seq <= upto_seq)
    rows = conn.execute(query.order_by(observation_records.c.last_seq).limit(limit)).all()
    texts = records_by_id(conn, [row.rollout_id for row in rows])
    return [
        StoredRecordRow(row.rollout_id, row.last_seq, texts[row.rollout_id])
        for row in rows
        if row.rollout_id in texts
    ]


def computed_rows(records: Sequence[StoredRecordRow]) -> list[dict[str, Any]]:
    """The table rows for these records (CPU only: the follower runs it off the event loop)."""
    rows = []
    for record in records:
        digest = compact_digest(parse_json(record.text))
        rows.append(
            {
                "rollout_id": record.rollout_id,
                "last_seq": record.last_seq,
                **digest.values(),
                **stored_columns(digest),
            }
        )
    return rows


def write_rows(conn: Connection, rows: Sequence[dict[str, Any]]) -> int:
    """Store rows, each replacing the rollout's row only when computed from a later record
    (two followers may race: the one that read the newer record wins). Returns rows written."""
    written = 0
    for first in range(0, len(rows), IN_CHUNK):
        chunk = rows[first : first + IN_CHUNK]
        ids = [row["rollout_id"] for row in chunk]
        held: dict[str, int] = {
            row.rollout_id: row.last_seq
            for row in conn.execute(
                select(health_findings.c.rollout_id, health_findings.c.last_seq).where(
                    health_findings.c.rollout_id.in_(ids)
                )
            )
        }
        newer = [row for row in chunk if held.get(row["rollout_id"], -1) < row["last_seq"]]
        replaced = [row["rollout_id"] for row in newer if row["rollout_id"] in held]
        if replaced:
            conn.execute(delete(health_findings).where(health_findings.c.rollout_id.in_(replaced)))
        if newer:
            conn.execute(insert(health_findings), newer)
        written += len(newer)
    return written


def _orphaned() -> Any:
    """Rows of rollouts that no longer have a record (deleted)."""
    return ~(
        select(observation_records.c.rollout_id)
        .where(observation_records.c.rollout_id == health_findings.c.rollout_id)
        .exists()
    )


async def count_orphans(conn: AsyncConnection) -> int:
    query = select(func.count()).select_from(health_findings).where(_orphaned())
    return int((await conn.execute(query)).scalar_one())


def delete_orphans(conn: Connection) -> int:
    return int(conn.execute(delete(health_findings).where(_orphaned())).rowcount or 0)


_HIGH_WATER = select(func.max(health_findings.c.last_seq))


async def high_water(conn: AsyncConnection) -> int:
    """The last_seq up to which every record has been checked (the follower writes its pages
    in last_seq order, each in one transaction)."""
    return int((await conn.execute(_HIGH_WATER)).scalar() or 0)


def stored_high_water(conn: Connection) -> int:
    """``high_water`` on a synchronous connection."""
    return int(conn.execute(_HIGH_WATER).scalar() or 0)


@dataclass(frozen=True)
class VerdictCounts:
    """Rollouts by their own verdict (fresh rows), and records without a fresh row."""

    by_verdict: dict[str, int]
    behind: int


async def verdict_counts(conn: AsyncConnection) -> VerdictCounts:
    fresh = (
        await conn.execute(
            select(health_findings.c.verdict, func.count())
            .select_from(
                health_findings.join(
                    observation_records,
                    (observation_records.c.rollout_id == health_findings.c.rollout_id)
                    & (observation_records.c.last_seq == health_findings.c.last_seq),
                )
            )
            .group_by(health_findings.c.verdict)
        )
    ).all()
    records = (
        await conn.execute(select(func.count()).select_from(observation_records))
    ).scalar_one()
    by_verdict = dict.fromkeys(("healthy", "unhealthy", "unobserved"), 0)
    by_verdict.update({str(verdict): int(count) for verdict, count in fresh})
    return VerdictCounts(by_verdict, int(records) - sum(by_verdict.values()))
