"""``ledger verify``'s check of ``health_findings``: derived state, not a projection, so it is
not rebuilt from the log; each row that claims to be current (its ``last_seq`` equals its
record's) is recomputed from that record and compared. Rows behind their record are counted,
not failed: readers check those records themselves (the freshness rule)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from ledger.areas.health import findings_store
from ledger.areas.health.findings_store import COMPUTED_COLUMNS, StoredRecordRow
from ledger.areas.health.queries import snapshot
from ledger.areas.health.tables import health_findings
from ledger.areas.observations.tables import observation_records

PAGE = 500
MAX_REPORTED = 10


@dataclass
class FindingsReport:
    checked: int = 0
    behind: int = 0  # records without a current row (computed on read until the follower runs)
    orphaned: int = 0  # rows of rollouts without a record (removed when the follower resumes)
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


async def verify_findings(engine: AsyncEngine, *, page: int = PAGE) -> FindingsReport:
    """Page by rollout id, each page in its own short read (a long verify pins no snapshot)."""
    report = FindingsReport()
    after = ""
    while True:
        async with engine.connect() as conn, conn.begin():
            await conn.run_sync(snapshot)  # the rows and their records, together
            rows = (
                await conn.execute(
                    select(
                        observation_records.c.rollout_id,
                        observation_records.c.last_seq,
                        health_findings.c.last_seq.label("findings_seq"),
                        *(health_findings.c[name] for name in COMPUTED_COLUMNS),
                    )
                    .select_from(
                        observation_records.outerjoin(
                            health_findings,
                            health_findings.c.rollout_id == observation_records.c.rollout_id,
                        )
                    )
                    .where(observation_records.c.rollout_id > after)
                    .order_by(observation_records.c.rollout_id)
                    .limit(page)
                )
            ).all()
            current = [row for row in rows if row.findings_seq == row.last_seq]
            ids = [row.rollout_id for row in current]
            texts = await conn.run_sync(findings_store.records_by_id, ids)
        report.behind += len(rows) - len(current)
        stored_records = [
            StoredRecordRow(row.rollout_id, row.last_seq, texts[row.rollout_id])
            for row in current
            if row.rollout_id in texts
        ]
        for row, rebuilt in zip(current, findings_store.computed_rows(stored_records), strict=True):
            report.checked += 1
            stored = dict(zip(COMPUTED_COLUMNS, tuple(row)[3:], strict=True))
            for name in COMPUTED_COLUMNS:
                # Booleans come back as 0/1 from SQLite.
                if stored[name] != rebuilt[name] and len(report.differences) < MAX_REPORTED:
                    report.differences.append(
                        f"health_findings {row.rollout_id}: {name} is {stored[name]!r}, "
                        f"its record gives {rebuilt[name]!r}"
                    )
        if len(rows) < page:
            break
        after = rows[-1].rollout_id
    async with engine.connect() as conn:
        orphaned = (
            ~select(observation_records.c.rollout_id)
            .where(observation_records.c.rollout_id == health_findings.c.rollout_id)
            .exists()
        )
        report.orphaned = int(
            (
                await conn.execute(
                    select(func.count()).select_from(health_findings).where(orphaned)
                )
            ).scalar_one()
        )
    return report
