"""The captures service: Gym's CaptureStore as commands (append, mark, clear, pending) and reads.

Every decision that depends on state (is this model_call_id already captured, and with what?
what is the next call_index?) is made inside the write command, against the projection, so it
is linearizable across writer batches, processes and PostgreSQL replicas.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from ledger.areas.captures.events import (
    CAPTURE_CLEARED,
    CAPTURE_MARKED_INCOMPLETE,
    CAPTURE_PENDING_ANNOUNCED,
    CAPTURE_PENDING_WITHDRAWN,
    MODEL_CALL_CAPTURED,
    CaptureCleared,
    CaptureMarkedIncomplete,
    CapturePendingAnnounced,
    CapturePendingWithdrawn,
)
from ledger.areas.captures.queries import (
    CaptureView,
    StoredCall,
    capture_view,
    find_call,
    is_pending,
    load_state,
    lookup_capture,
    lookup_captures,
    merge_gaps,
)
from ledger.areas.runs.commands import LabelCheck, apply_label, check_label, label_event
from ledger.areas.runs.labels import check_run_label
from ledger.gym.capture_attachment import build_capture_attachment, capture_attachment
from ledger.gym.capture_lines import CaptureExchange
from ledger.gym.ids import validate_rollout_id
from ledger.gym.model_calls import (
    AGGREGATE_FIELDS,
    ModelCallRecord,
    aggregate_model_call_values,
    build_model_call_record,
)
from ledger.log.encoding import EncodedPayload, encode_body, holds_same_payload
from ledger.log.errors import Conflict, InvalidPayload, LedgerError
from ledger.log.freshness import Freshness
from ledger.log.records import NewEvent
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction

# One batch request carries at most this many items (documented in docs/api.md).
MAX_BATCH_ITEMS = 1000


@dataclass(frozen=True)
class CaptureReceipt:
    """The reply to an append: 201 when ``created``, 200 for an idempotent repeat."""

    rollout_id: str
    model_call_id: str
    call_index: int
    seq: int
    created: bool

    def public(self) -> dict[str, Any]:
        return {
            "rollout_id": self.rollout_id,
            "model_call_id": self.model_call_id,
            "call_index": self.call_index,
            "seq": self.seq,
        }


@dataclass(frozen=True)
class MarkerReceipt:
    """The reply to mark/clear/announce/withdraw: whether an event was appended, and which."""

    rollout_id: str
    changed: bool
    seq: int | None


@dataclass(frozen=True)
class PreparedExchange:
    """A validated exchange and its ``model_call.captured`` payload, encoded before the writer
    sees it: the writer stores ``payload`` as is (no second encoding on its thread)."""

    rollout_id: str
    payload: EncodedPayload

    @property
    def exchange(self) -> dict[str, Any]:
        value = self.payload.body["exchange"]
        assert isinstance(value, dict)
        return value

    @property
    def model_call_id(self) -> str:
        value = self.payload.body["model_call_id"]
        assert isinstance(value, str)
        return value

    @property
    def sha256(self) -> str:
        """The event's ``payload_sha256``: the capture's identity for idempotency."""
        return self.payload.sha256

    @property
    def size(self) -> int:
        return self.payload.size


@dataclass(frozen=True)
class BatchItemResult:
    status: int
    receipt: CaptureReceipt | None = None
    detail: str | None = None

    def public(self) -> dict[str, Any]:
        if self.receipt is not None:
            return {"status": self.status, **self.receipt.public()}
        return {"status": self.status, "detail": self.detail}


MAX_ERRORS_SHOWN = 10
MAX_ERRORS_LISTED = 1000
MAX_ERROR_CHARS = 300


def describe_validation_error(exc: ValidationError, prefix: str) -> str:
    """``exchange.status_code: Input should be a valid integer; ...`` (names every field)."""
    parts = []
    # An error body is bounded: the first errors, each message and location cut short.
    if exc.error_count() > MAX_ERRORS_LISTED:
        # Materialising each error would cost far more memory than the body.
        return f"{exc.error_count()} validation errors, too many to list"
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for error in errors[:MAX_ERRORS_SHOWN]:
        location = ".".join(str(part) for part in (prefix, *error["loc"]))[:MAX_ERROR_CHARS]
        parts.append(f"{location}: {str(error['msg'])[:MAX_ERROR_CHARS]}")
    more = len(errors) - MAX_ERRORS_SHOWN
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def prepare_exchange(
    rollout_id: object, body: object, *, prefix: str = "exchange"
) -> PreparedExchange:
    """Validate one exchange (Gym's capture-line shape) and assign ``model_call_id`` if absent.

    The stored exchange is Gym's line: the keys Gym writes (core keys always, optional ones when
    set), with the values exactly as received, so the mirror reproduces what the client sent.
    """
    checked_id = validate_rollout_id(rollout_id)
    if not isinstance(body, Mapping):
        raise InvalidPayload(f"{prefix}: must be a JSON object, not {type(body).__name__}")
    try:
        model = CaptureExchange.model_validate(body)
    except ValidationError as exc:
        raise InvalidPayload(describe_validation_error(exc, prefix)) from None
    exchange = {key: body.get(key) for key in model.line_keys()}
    if exchange.get("model_call_id") is None:
        exchange["model_call_id"] = uuid.uuid4().hex
    try:
        # The event's payload, encoded here and stored as is: the body is what
        # ``catalogue.encode`` makes of ModelCallCaptured (same keys, in its field order).
        # Nothing is derived from it here: the views do, behind the acknowledgement.
        payload = encode_body({"model_call_id": exchange["model_call_id"], "exchange": exchange})
    except ValueError as exc:  # a lone surrogate where the model does not look
        raise InvalidPayload(f"{prefix}: not storable JSON: {exc}") from None
    return PreparedExchange(rollout_id=checked_id, payload=payload)


def prepare_batch_item(item: object, prefix: str) -> PreparedExchange:
    if not isinstance(item, Mapping):
        raise InvalidPayload(f"{prefix}: must be an object with rollout_id, exchange")
    unknown = sorted(set(item) - {"rollout_id", "exchange"})
    if unknown:
        raise InvalidPayload(f"{prefix}.{unknown[0]}: Extra inputs are not permitted")
    for required in ("rollout_id", "exchange"):
        if required not in item:
            raise InvalidPayload(f"{prefix}.{required}: Field required")
    return prepare_exchange(item["rollout_id"], item["exchange"], prefix=f"{prefix}.exchange")


def append_one(
    tx: WriteTransaction, prepared: PreparedExchange, run: str | None = None
) -> CaptureReceipt:
    """Idempotent on model_call_id; otherwise the rollout's next position. With ``run``, the
    rollout's generation is labelled too (a repeat labels it as well).

    Raises Conflict before appending anything, so a batch can carry on with its other items.
    """
    label = None if run is None else check_label(tx, prepared.rollout_id, run)
    if label is not None:
        label.refuse_if_different()
    lookup = lookup_capture(tx.conn, prepared.rollout_id, prepared.model_call_id)
    receipt = repeat_of(prepared, lookup.existing)
    if receipt is None:
        appended = tx.append(MODEL_CALL_CAPTURED, prepared.payload, rollout_id=prepared.rollout_id)
        receipt = CaptureReceipt(
            prepared.rollout_id,
            prepared.model_call_id,
            lookup.next_call_index,
            appended.event.seq,
            created=True,
        )
    if label is not None:
        apply_label(tx, label)
    return receipt


def repeat_of(prepared: PreparedExchange, existing: StoredCall | None) -> CaptureReceipt | None:
    """The receipt of an idempotent repeat of ``existing``; None when the exchange is new.
    Raises Conflict for other bytes under a stored model_call_id."""
    if existing is None:
        return None
    _refuse_other_bytes(prepared, existing.exchange_sha256)
    return CaptureReceipt(
        prepared.rollout_id,
        prepared.model_call_id,
        existing.call_index,
        existing.seq,
        created=False,
    )


def _refuse_other_bytes(prepared: PreparedExchange, stored_sha256: str | None) -> None:
    if not holds_same_payload(stored_sha256, prepared.payload):
        raise Conflict(
            f"model_call_id {prepared.model_call_id!r} was already captured for rollout "
            f"{prepared.rollout_id!r} with a different exchange"
        )


def append_command(
    prepared: PreparedExchange, run: str | None = None
) -> Callable[[WriteTransaction], CaptureReceipt]:
    def command(tx: WriteTransaction) -> CaptureReceipt:
        return append_one(tx, prepared, run)

    return command


@dataclass(frozen=True)
class _Planned:
    """A capture of a batch command's new events: its position, its event's place among
    them (its seq is known once they are appended), and whether this item appends it (else
    the item repeats an earlier item of the batch)."""

    call_index: int
    event_index: int
    exchange_sha256: str
    created: bool = True


def append_many_command(
    prepared: Sequence[PreparedExchange], run: str | None = None
) -> Callable[[WriteTransaction], list[CaptureReceipt | Conflict]]:
    """A whole batch request in one write command: no savepoint and no future per item.

    Each item is decided exactly as ``append_one`` would decide it after the items before it,
    but what is stored is read once per rollout (one statement for all its model_call_ids)
    and then kept up to date as the items are decided: within the command nothing else
    writes these rollouts, and each new capture takes the next position. The new events
    (captures, and a rollout's label after its first accepted item) are appended together at
    the end, in item order. With ``run``, each rollout's label is read once too; an item of a
    rollout labelled otherwise is a 409 of its own.
    """

    def command(tx: WriteTransaction) -> list[CaptureReceipt | Conflict]:
        labels: dict[str, LabelCheck] = {}
        if run is not None:
            for rollout_id in dict.fromkeys(item.rollout_id for item in prepared):
                labels[rollout_id] = check_label(tx, rollout_id, run)
        ids_by_rollout: dict[str, set[str]] = {}
        for item in prepared:
            ids_by_rollout.setdefault(item.rollout_id, set()).add(item.model_call_id)
        lookups = {
            rollout_id: lookup_captures(tx.conn, rollout_id, model_call_ids)
            for rollout_id, model_call_ids in ids_by_rollout.items()
        }
        planned: dict[tuple[str, str], _Planned] = {}
        new_events: list[NewEvent] = []
        decided: list[CaptureReceipt | Conflict | _Planned] = []
        for item in prepared:
            lookup = lookups[item.rollout_id]
            label = labels.get(item.rollout_id)
            plan = planned.get((item.rollout_id, item.model_call_id))
            existing = lookup.existing.get(item.model_call_id)
            try:
                if label is not None:
                    label.refuse_if_different()
                if plan is not None:  # a repeat of an earlier item of this batch
                    _refuse_other_bytes(item, plan.exchange_sha256)
                    decided.append(replace(plan, created=False))
                    continue
                receipt = repeat_of(item, existing)
            except Conflict as exc:
                decided.append(exc)
                continue
            if receipt is None:
                plan = _Planned(lookup.next_call_index, len(new_events), item.sha256)
                planned[(item.rollout_id, item.model_call_id)] = plan
                lookup.next_call_index += 1
                new_events.append(
                    NewEvent(MODEL_CALL_CAPTURED, item.payload, rollout_id=item.rollout_id)
                )
                decided.append(plan)
            else:
                decided.append(receipt)
            if label is not None:
                labelled = label_event(label)
                if labelled is not None:
                    new_events.append(labelled)
        appended = tx.append_many(new_events)
        outcomes: list[CaptureReceipt | Conflict] = []
        for item, outcome in zip(prepared, decided, strict=True):
            if isinstance(outcome, _Planned):
                outcomes.append(
                    CaptureReceipt(
                        item.rollout_id,
                        item.model_call_id,
                        outcome.call_index,
                        appended[outcome.event_index].event.seq,
                        created=outcome.created,
                    )
                )
            else:
                outcomes.append(outcome)
        return outcomes

    return command


class CaptureService:
    def __init__(self, store: LedgerStore, freshness: Freshness | None = None) -> None:
        self._store = store
        # A rollout's reads wait for the capture view to reflect its events (log/freshness.py;
        # 503 past the bound); without it (a store with no projector: a write tool, the
        # proxy's capture process) they answer with what is there.
        self._freshness = freshness

    # ---- writes -------------------------------------------------------------------------

    async def append(
        self, rollout_id: str, body: object, *, run: str | None = None
    ) -> CaptureReceipt:
        """Append one exchange; with ``run``, label the rollout (409 if labelled otherwise)."""
        prepared = prepare_exchange(rollout_id, body)
        run = None if run is None else check_run_label(run)
        result: CaptureReceipt = await self._store.execute(
            append_command(prepared, run), size_hint=prepared.size
        )
        return result

    async def append_many(
        self,
        items: Sequence[object],
        refused: Mapping[int, str] | None = None,
        *,
        run: str | None = None,
        yielding: bool = False,
    ) -> list[BatchItemResult]:
        """One result per item, in order; a bad item fails only itself. ``refused`` holds the
        items the body parser already found wrong (422 with that detail). ``run`` labels every
        item's rollout (an item of a rollout labelled otherwise is a 409). ``yielding``: give
        the event loop a turn after each item's validation and derivation (a background
        caller's batch then delays other requests by one item's work, not the batch's)."""
        run = None if run is None else check_run_label(run)
        if len(items) > MAX_BATCH_ITEMS:
            raise InvalidPayload(
                f"items: at most {MAX_BATCH_ITEMS} items per batch, got {len(items)}"
            )
        results: list[BatchItemResult | None] = [None] * len(items)
        positions: list[int] = []
        prepared: list[PreparedExchange] = []
        for position, item in enumerate(items):
            if refused and position in refused:
                results[position] = BatchItemResult(422, detail=refused[position])
                continue
            try:
                prepared.append(prepare_batch_item(item, f"items.{position}"))
            except LedgerError as exc:
                results[position] = BatchItemResult(exc.status_code, detail=exc.message)
                continue
            finally:
                if yielding:
                    await asyncio.sleep(0)
            positions.append(position)
        if prepared:
            outcomes = await self._store.execute(
                append_many_command(prepared, run), size_hint=sum(p.size for p in prepared)
            )
            for position, outcome in zip(positions, outcomes, strict=True):
                if isinstance(outcome, Conflict):
                    results[position] = BatchItemResult(outcome.status_code, detail=outcome.message)
                else:
                    results[position] = BatchItemResult(201 if outcome.created else 200, outcome)
        return [result for result in results if result is not None]

    async def _append_marker(
        self,
        rollout_id: str,
        kind: str,
        payload: BaseModel,
        changes: Callable[[WriteTransaction, int], bool],
    ) -> MarkerReceipt:
        """Append ``kind`` unless ``changes(tx, generation)`` says it would change nothing (then
        no event: marking, clearing, announcing and withdrawing are all idempotent)."""
        validate_rollout_id(rollout_id)

        def command(tx: WriteTransaction) -> MarkerReceipt:
            if not changes(tx, tx.generation_of(rollout_id)):
                return MarkerReceipt(rollout_id, changed=False, seq=None)
            appended = tx.append(kind, payload, rollout_id=rollout_id)
            return MarkerReceipt(rollout_id, changed=True, seq=appended.event.seq)

        result: MarkerReceipt = await self._store.execute(command)
        return result

    async def mark_incomplete(self, rollout_id: str, reason: str | None = None) -> MarkerReceipt:
        return await self._append_marker(
            rollout_id,
            CAPTURE_MARKED_INCOMPLETE,
            CaptureMarkedIncomplete(reason=reason),
            lambda tx, generation: not load_state(tx.conn, rollout_id, generation).incomplete,
        )

    async def clear(self, rollout_id: str) -> MarkerReceipt:
        """Forget the calls, marker and pending calls; ``call_index`` restarts at 0."""

        def has_something(tx: WriteTransaction, generation: int) -> bool:
            state = load_state(tx.conn, rollout_id, generation)
            return bool(state.has_evidence or state.next_call_index or state.pending_count)

        return await self._append_marker(
            rollout_id, CAPTURE_CLEARED, CaptureCleared(), has_something
        )

    async def announce_pending(self, rollout_id: str, model_call_id: str) -> MarkerReceipt:
        """Announce an in-flight call; no event if it is already pending or already captured."""

        def is_new(tx: WriteTransaction, generation: int) -> bool:
            return find_call(
                tx.conn, rollout_id, generation, model_call_id
            ) is None and not is_pending(tx.conn, rollout_id, generation, model_call_id)

        return await self._append_marker(
            rollout_id,
            CAPTURE_PENDING_ANNOUNCED,
            CapturePendingAnnounced(model_call_id=model_call_id),
            is_new,
        )

    async def withdraw_pending(self, rollout_id: str, model_call_id: str) -> MarkerReceipt:
        return await self._append_marker(
            rollout_id,
            CAPTURE_PENDING_WITHDRAWN,
            CapturePendingWithdrawn(model_call_id=model_call_id),
            lambda tx, generation: is_pending(tx.conn, rollout_id, generation, model_call_id),
        )

    # ---- reads --------------------------------------------------------------------------

    async def view(self, rollout_id: str, *, payloads: bool) -> CaptureView:
        validate_rollout_id(rollout_id)
        if self._freshness is not None:
            await self._freshness.wait_for_rollout(rollout_id)
        return await self._store.read_sync(lambda conn: capture_view(conn, rollout_id, payloads))

    async def records(
        self, rollout_id: str, *, payloads: bool
    ) -> tuple[list[ModelCallRecord], list[dict[str, Any]]]:
        """Gym's tolerant read of the rollout, as records, and the merge gaps (§5.3)."""
        view = await self.view(rollout_id, payloads=payloads)
        return records_of(view, payloads=payloads), gaps_of(view)

    async def model_calls(self, rollout_id: str, *, payloads: bool) -> dict[str, Any]:
        if not payloads:
            view = await self.view(rollout_id, payloads=False)
            return {"rollout_id": rollout_id, "calls": stored_calls(view), "gaps": gaps_of(view)}
        records, gaps = await self.records(rollout_id, payloads=payloads)
        calls = [record.model_dump(mode="json") for record in records]
        return {"rollout_id": rollout_id, "calls": calls, "gaps": gaps}

    async def attachment(self, rollout_id: str, *, payloads: bool) -> dict[str, Any]:
        """Gym's ``ng_model_call_capture`` (§6.1)."""
        if not payloads:
            view = await self.view(rollout_id, payloads=False)
            calls = stored_calls(view)
            metrics = aggregate_model_call_values(
                [{name: call[name] for name in AGGREGATE_FIELDS} for call in calls]
            )
            return capture_attachment(rollout_id, metrics, calls, gaps_of(view))
        records, gaps = await self.records(rollout_id, payloads=payloads)
        return build_capture_attachment(rollout_id, records, gaps, include_payloads=payloads)


def records_of(view: CaptureView, *, payloads: bool) -> list[ModelCallRecord]:
    records = []
    for call in view.calls:
        if call.damaged:
            continue
        if payloads and call.payload is not None:
            records.append(build_model_call_record(call.payload["exchange"], call.call_index))
        elif call.record is not None:
            records.append(ModelCallRecord.model_validate(call.record))
    return records


def stored_calls(view: CaptureView) -> list[dict[str, Any]]:
    """The calls without payloads as the capture projection stored them: each is
    ``build_model_call_record(...).model_dump(mode="json")`` without the payload keys, in
    Gym's field order, so a read need not validate and dump every record again."""
    return [call.record for call in view.calls if not call.damaged and call.record is not None]


def gaps_of(view: CaptureView) -> list[dict[str, Any]]:
    return merge_gaps(view.state, view.counts)
