"""The documented lineage SQL views (docs/sql.md, "Lineage"), on every backend."""

from __future__ import annotations

from ledger.areas.lineage.service import LineageService
from ledger.gym.lineage import CommittedRow, FailureRow
from ledger.log.adhoc import run_readonly_query
from ledger.log.store import LedgerStore
from tests.lineage.rows import committed_row, failure_row


async def rows_of(url: str, query: str) -> list[tuple[object, ...]]:
    result = await run_readonly_query(url, query)
    return [tuple(row) for row in result.rows]


async def test_manifest_rows_fences_and_orphaned_staging_keys(store: LedgerStore) -> None:
    service = LineageService(store)
    for rollout_id in ("r1", "r2", "r3"):
        await service.record(
            rollout_id, CommittedRow.model_validate(committed_row(rollout_id, "c1"))
        )
        await service.record(rollout_id, FailureRow.model_validate(failure_row("c2")))
    await service.record("r1", CommittedRow.model_validate({**committed_row("r1", "c0")}))
    await service.retire(["r2", "r3", "fenced-only"])
    late = await service.record("r2", CommittedRow.model_validate(committed_row("r2", "late")))
    await service.record("r2", FailureRow.model_validate(failure_row("late-failure")))
    await service.delete(["r3"])
    url = store.url

    manifest_rows = await rows_of(
        url,
        "SELECT rollout_id, generation, row_kind, model_call_id, staging_key, failure_reason "
        "FROM lineage_manifest_rows ORDER BY rollout_id, seq",
    )
    assert manifest_rows == [
        ("r1", 0, "call", "c1", "r1/c1", None),
        ("r1", 0, "failure", "c2", None, "worker_capture_failed"),
        ("r1", 0, "call", "c0", "r1/c0", None),
    ]

    fences = await rows_of(
        url, "SELECT rollout_id, generation, fenced_seq FROM lineage_fences ORDER BY rollout_id"
    )
    assert [(r[0], r[1]) for r in fences] == [("fenced-only", 0), ("r2", 0)]
    assert all(isinstance(r[2], int) and r[2] < (late.seq or 0) for r in fences)

    orphaned = await rows_of(
        url,
        "SELECT seq, rollout_id, generation, model_call_id, staging_key "
        "FROM orphaned_staging_keys ORDER BY seq",
    )
    assert orphaned == [(late.seq, "r2", 0, "late", "r2/late")]
