"""Where the recorder's batches of observed calls become captures: in the server process
(``InProcessSink``) or in a capture process beside it (capture_process.py). Both run
``append_observed``: each call's capture line derived (``exchange_of``), then one
``append_many`` through the captures service, the same validation and write command as
``POST /v1/model-calls/batch``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ledger.areas.captures.derivation import column_holds_nul
from ledger.areas.captures.service import CaptureService
from ledger.gym.finite_json import holds_nul
from ledger.gym.observed_calls import ObservedCall, exchange_of, is_finite_json

log = logging.getLogger(__name__)

COLUMN_NUL = "a NUL character (\\u0000) in a field the ledger keeps as a text column"
# (rollout_id, the call): what the recorder hands a sink, in its queue's order.
Observed = tuple[str, ObservedCall]


@dataclass(frozen=True)
class Outcome:
    """One call's capture: the append's status (201 new, 200 an idempotent repeat, 4xx
    refused) and its detail; ``status`` None when the capture line could not be derived."""

    status: int | None
    detail: str = ""


class AppendFailed(Exception):
    """The batch's append raised (the database down, ...): no call of it is known captured.
    ``reason`` names what raised, as the recorder's failure metric labels it."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class CaptureSink(Protocol):
    async def append(self, calls: Sequence[Observed]) -> list[Outcome]:
        """One outcome per call, in order; raises ``AppendFailed`` when the batch failed."""
        ...

    async def close(self, wait_s: float) -> None: ...


async def append_observed(
    captures: CaptureService, calls: Sequence[Observed], *, yielding: bool
) -> list[Outcome]:
    """Derive and append a batch. ``yielding``: give the event loop a turn after each call's
    derivation and validation (in the server, whose loop also forwards calls)."""
    # Each call's outcome; the derived ones are replaced by their append's below.
    outcomes: list[Outcome] = []
    positions: list[int] = []
    items: list[object] = []
    for position, (rollout_id, call) in enumerate(calls):
        try:
            exchange = exchange_of(call)
        except Exception as exc:  # a bug in the derivation must not stop the recorder
            log.exception("deriving the capture of %s failed", call.model_call_id)
            outcomes.append(Outcome(None, str(exc)))
            continue
        if not is_finite_json(exchange):
            outcomes.append(Outcome(422, "exchange: NaN or Infinity is not JSON; not stored"))
            continue
        # The derivation runs only for the rare exchange that holds a NUL at all.
        if holds_nul(exchange) and column_holds_nul(exchange):
            outcomes.append(Outcome(422, f"exchange: {COLUMN_NUL}; not stored"))
            continue
        outcomes.append(Outcome(None, "not appended"))
        positions.append(position)
        items.append({"rollout_id": rollout_id, "exchange": exchange})
        if yielding:
            await asyncio.sleep(0)
    if items:
        try:
            results = await captures.append_many(items, yielding=yielding)
        except Exception as exc:
            raise AppendFailed(type(exc).__name__, str(exc)) from exc
        for position, result in zip(positions, results, strict=True):
            outcomes[position] = Outcome(result.status, result.detail or "")
    return outcomes


class InProcessSink:
    """Appends in the server process, on its event loop (yielding between calls)."""

    def __init__(self, captures: CaptureService) -> None:
        self._captures = captures

    async def append(self, calls: Sequence[Observed]) -> list[Outcome]:
        return await append_observed(self._captures, calls, yielding=True)

    async def close(self, wait_s: float) -> None:
        return None
