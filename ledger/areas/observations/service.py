"""The observations service: record agent observations and collector results; read records.

Writes are single appends (the projection recomputes the rollout's record in the same
transaction); reads are one lookup of the stored record.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.observations.events import (
    OBSERVATIONS_RECORDED,
    RESULT_RECORDED,
    ObservationsRecorded,
)
from ledger.areas.observations.queries import (
    ExportFilter,
    count_exported,
    export_page,
    read_record_text_sync,
)
from ledger.areas.runs.commands import apply_label, check_label
from ledger.areas.runs.labels import check_run_label
from ledger.gym.export_view import export_view
from ledger.gym.ids import validate_rollout_id
from ledger.gym.observations import AgentObservationBundle
from ledger.gym.result import RolloutResult
from ledger.log.canonical import canonical_bytes, compact_json
from ledger.log.errors import InvalidPayload, NotFound
from ledger.log.freshness import Freshness
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction

RecordView = Literal["stored", "export"]
MAX_IDEMPOTENCY_KEY = 200


@dataclass(frozen=True)
class RecordedReceipt:
    rollout_id: str
    generation: int
    seq: int
    created: bool

    def public(self) -> dict[str, Any]:
        return {
            "rollout_id": self.rollout_id,
            "generation": self.generation,
            "seq": self.seq,
            "created": self.created,
        }


MAX_ERRORS_SHOWN = 10
MAX_ERRORS_LISTED = 1000
MAX_ERROR_CHARS = 300


def describe_validation_error(exc: ValidationError) -> str:
    """``records.0.model_calls.0: model_call_id or both ...`` — the contract's words, located."""
    parts = []
    # An error body is bounded: the first errors, each message and location cut short.
    if exc.error_count() > MAX_ERRORS_LISTED:
        # Materialising each error would cost far more memory than the body.
        return f"{exc.error_count()} validation errors, too many to list"
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for error in errors[:MAX_ERRORS_SHOWN]:
        message = str(error["msg"])[:MAX_ERROR_CHARS]
        if error["type"] == "value_error":
            message = message.removeprefix("Value error, ")
        location = ".".join(str(part) for part in error["loc"])[:MAX_ERROR_CHARS]
        parts.append(f"{location}: {message}" if location else message)
    more = len(errors) - MAX_ERRORS_SHOWN
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_body(model: type[BaseModel], body: object, what: str) -> tuple[BaseModel, int]:
    """Validate a JSON body into ``model``; 422 with every problem named. Returns (model, size)."""
    if not isinstance(body, Mapping):
        raise InvalidPayload(f"{what} must be a JSON object, not {type(body).__name__}")
    try:
        # The routes' JSON parser has refused NaN and Infinity (app/http/json_body.py), which
        # pydantic would quietly turn into null inside free-form items.
        size = len(canonical_bytes(body))
    except ValueError as exc:
        raise InvalidPayload(f"{what} is not JSON: {exc}") from None
    try:
        parsed = model.model_validate(body)
    except ValidationError as exc:
        raise InvalidPayload(describe_validation_error(exc)) from None
    return parsed, size


def _idempotency_key(kind: str, rollout_id: str, key: str | None) -> str | None:
    if key is None:
        return None
    if not key or len(key) > MAX_IDEMPOTENCY_KEY:
        raise InvalidPayload(f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} characters")
    # Keys are unique across the whole log: scope them so areas and rollouts cannot collide.
    return f"{kind}:{rollout_id}:{key}"


class ObservationService:
    def __init__(
        self,
        store: LedgerStore,
        freshness: Freshness | None = None,
        *,
        export_page_size: int = 500,
    ) -> None:
        self._store = store
        # A rollout's reads wait for the views to reflect its events (log/freshness.py);
        # without it (a store with no projector: a write tool) they answer with what is there.
        self._freshness = freshness
        self._export_page_size = export_page_size

    # ---- writes ---------------------------------------------------------------------------

    async def _append(
        self,
        kind: str,
        rollout_id: str,
        payload: BaseModel,
        *,
        size: int,
        idempotency_key: str | None,
        run: str | None,
    ) -> RecordedReceipt:
        key = _idempotency_key(kind, rollout_id, idempotency_key)
        run = None if run is None else check_run_label(run)

        def command(tx: WriteTransaction) -> RecordedReceipt:
            label = None if run is None else check_label(tx, rollout_id, run)
            if label is not None:
                label.refuse_if_different()  # before anything is appended
            appended = tx.append(kind, payload, rollout_id=rollout_id, idempotency_key=key)
            if label is not None:
                apply_label(tx, label)
            event = appended.event
            return RecordedReceipt(rollout_id, event.generation, event.seq, appended.created)

        return await self._store.execute(command, size_hint=size)

    async def record_observations(
        self,
        rollout_id: str,
        body: object,
        *,
        idempotency_key: str | None = None,
        run: str | None = None,
    ) -> RecordedReceipt:
        """Record an ``AgentObservationBundle``; it supersedes the generation's earlier one.
        ``run`` labels the rollout in the same command (409 if it holds another label)."""
        validate_rollout_id(rollout_id)
        bundle, size = parse_body(AgentObservationBundle, body, "observation bundle")
        assert isinstance(bundle, AgentObservationBundle)
        return await self._append(
            OBSERVATIONS_RECORDED,
            rollout_id,
            ObservationsRecorded(bundle=bundle),
            size=size,
            idempotency_key=idempotency_key,
            run=run,
        )

    async def record_result(
        self,
        rollout_id: str,
        body: object,
        *,
        idempotency_key: str | None = None,
        run: str | None = None,
    ) -> RecordedReceipt:
        """Record the collector's result; it supersedes the generation's earlier one.
        ``run`` labels the rollout in the same command (409 if it holds another label)."""
        validate_rollout_id(rollout_id)
        result, size = parse_body(RolloutResult, body, "rollout result")
        return await self._append(
            RESULT_RECORDED,
            rollout_id,
            result,
            size=size,
            idempotency_key=idempotency_key,
            run=run,
        )

    # ---- reads ----------------------------------------------------------------------------

    async def record_text(self, rollout_id: str) -> str:
        """The enriched record as stored (JSON text), exactly the bytes a reader gets."""
        validate_rollout_id(rollout_id)
        if self._freshness is not None:
            await self._freshness.wait_for_rollout(rollout_id)
        text = await self._store.read_sync(lambda conn: read_record_text_sync(conn, rollout_id))
        if text is None:
            raise NotFound(
                f"rollout {rollout_id!r} has no record: no capture, observations or result "
                "recorded for its current generation"
            )
        return text

    async def record(self, rollout_id: str, *, view: RecordView = "stored") -> dict[str, Any]:
        record: dict[str, Any] = json.loads(await self.record_text(rollout_id))
        return export_view(record) if view == "export" else record

    async def trajectory(self, rollout_id: str) -> dict[str, Any]:
        record = await self.record(rollout_id)
        trajectory = record.get("ng_trajectory")
        if not isinstance(trajectory, dict):
            raise NotFound(
                f"rollout {rollout_id!r} has no ng_trajectory: the projection failed "
                "(gap trajectory_projection_failed in its record)"
            )
        return trajectory

    async def count(self, selection: ExportFilter) -> int:
        async with self._store.read() as conn:
            return await count_exported(conn, selection)

    def export_lines(
        self, selection: ExportFilter, *, view: RecordView = "stored"
    ) -> AsyncIterator[str]:
        return export_lines(
            self._store.read, selection, view=view, page_size=self._export_page_size
        )


ReadConnection = Callable[[], AbstractAsyncContextManager[AsyncConnection]]


async def export_lines(
    read: ReadConnection,
    selection: ExportFilter,
    *,
    view: RecordView = "stored",
    page_size: int = 500,
) -> AsyncIterator[str]:
    """Enriched records as JSONL lines (newline included), page by page: constant memory.

    Each page is read in its own snapshot and pages follow ``last_seq``, so a record that
    changes during the export is emitted again later with its new content, never lost.
    """
    after = selection.after_seq
    while True:
        async with read() as conn:
            page = await export_page(conn, selection, after_seq=after, limit=page_size)
        for item in page:
            if view == "export":
                yield compact_json(export_view(json.loads(item.record))) + "\n"
            else:
                yield item.record + "\n"
        if len(page) < page_size:
            return
        after = page[-1].last_seq
