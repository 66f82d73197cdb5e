"""The lineage service: ledger rows, manifests, admission, retire/delete and the removal hold."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from ledger.app.metrics import LedgerMetrics
from ledger.areas.lineage import queries
from ledger.areas.lineage.queries import (
    OrphanedStagingKey,
    RecordResult,
    RemovalHold,
    RemovalResult,
)
from ledger.gym.ids import validate_rollout_id, validate_rollout_ids
from ledger.gym.lineage import CommittedRow, FailureRow, RolloutManifest, build_manifest, row_dict
from ledger.log.errors import RolloutRetiredError
from ledger.log.log_text import loggable
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction

log = logging.getLogger(__name__)


class LineageService:
    def __init__(
        self, store: LedgerStore, *, metrics: LedgerMetrics | None = None, page_max: int = 1000
    ) -> None:
        self._store = store
        self._metrics = metrics
        self.page_max = page_max

    async def record(self, rollout_id: str, row: CommittedRow | FailureRow) -> RecordResult:
        validate_rollout_id(rollout_id)
        body = row_dict(row)

        def command(tx: WriteTransaction) -> RecordResult:
            return queries.record_row(tx, rollout_id, body)

        result = await self._store.execute(command, size_hint=len(str(body)))
        if result.outcome == "discarded":
            if result.staging_key is not None:
                log.warning(
                    "discarded a late lineage row for retired rollout %s (model call %s); "
                    "staged tokens under staging key %s are referenced by no manifest",
                    rollout_id,
                    loggable(body["model_call_id"]),
                    loggable(result.staging_key),
                )
            else:
                log.warning(
                    "discarded a late failure row for retired rollout %s (model call %s)",
                    rollout_id,
                    loggable(body["model_call_id"]),
                )
        return result

    async def manifest(self, rollout_id: str) -> RolloutManifest:
        validate_rollout_id(rollout_id)
        view = await self._store.read_sync(lambda conn: queries.read_ledger_view(conn, rollout_id))
        if view.retired:
            raise RolloutRetiredError(rollout_id)
        return build_manifest(rollout_id, view.rows)

    async def admission(self, rollout_id: str) -> int:
        """The generation a new call is admitted into; RolloutRetiredError when fenced."""
        validate_rollout_id(rollout_id)
        return await self._store.read_sync(
            lambda conn: queries.unfenced_generation(conn, rollout_id)
        )

    async def has_rows(self, rollout_id: str) -> tuple[int, bool]:
        """(current generation, any row in it?); RolloutRetiredError when fenced."""
        validate_rollout_id(rollout_id)

        def look(conn: Connection) -> tuple[int, bool]:
            generation = queries.unfenced_generation(conn, rollout_id)
            return generation, queries.generation_has_rows(conn, rollout_id, generation)

        return await self._store.read_sync(look)

    async def find_rows(
        self, rollout_id: str, *, fingerprint: str | None, model_call_id: str | None
    ) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
        """The plug-in's parent lookup (``resolve``), once per model call: one snapshot on the
        reader thread (``read_sync``), not a thread hop per statement. RolloutRetiredError
        when fenced."""
        validate_rollout_id(rollout_id)

        def look(conn: Connection) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
            generation = queries.unfenced_generation(conn, rollout_id)
            rows = queries.find_rows(
                conn, rollout_id, generation, fingerprint=fingerprint, model_call_id=model_call_id
            )
            return generation, rows

        return await self._store.read_sync(look)

    async def retire(self, rollout_ids: Sequence[object]) -> RemovalResult:
        ids = validate_rollout_ids(rollout_ids)  # the whole batch first: a bad id changes nothing

        def command(tx: WriteTransaction) -> RemovalResult:
            return queries.retire(tx, ids)

        result = await self._store.execute(command, size_hint=64 * len(ids))
        if self._metrics is not None:
            self._metrics.fences.inc(result.fenced)
        return result

    async def delete(self, rollout_ids: Sequence[object]) -> RemovalResult:
        ids = validate_rollout_ids(rollout_ids)

        def command(tx: WriteTransaction) -> RemovalResult:
            return queries.delete(tx, ids)

        return await self._store.execute(command, size_hint=64 * len(ids))

    async def orphaned_staging_keys(self, *, after: int, limit: int) -> list[OrphanedStagingKey]:
        async with self._store.read() as conn:
            return await queries.orphaned_staging_keys(
                conn, after=after, limit=min(limit, self.page_max)
            )

    async def hold(self, reason: str) -> bool:
        return await self._store.execute(lambda tx: queries.set_hold(tx, reason))

    async def release(self) -> bool:
        return await self._store.execute(queries.release_hold)

    async def hold_status(self) -> RemovalHold | None:
        async with self._store.read() as conn:
            return await queries.removal_hold(conn)
