"""A log with every kind of event a Gym run writes, in realistic proportions, through the
services (so validation, derivation and idempotency are the real ones).

Per rollout: captures in batches and one at a time (about 1 KB exchanges, a few damaged), a
lineage row per call (a failure row now and then), an observation bundle midway and a
superseding one at the end, the result. Some rollouts also get an incomplete marker, a pending
call announced then captured or withdrawn, a clear that restarts their calls, a retire and a
late row that is discarded, or a delete and a second generation. The same arguments always
give the same events (but for their timestamps, and their interleaving when rollouts are
written concurrently).

Used by ``scripts/bench verify`` (the figures) and the verify tests (the per-event and
per-page projections of it must be identical).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any

from ledger.app.areas import views_follower
from ledger.areas.captures.service import CaptureService
from ledger.areas.lineage.service import LineageService
from ledger.areas.observations.service import ObservationService
from ledger.gym.lineage import CommittedRow, FailureRow
from ledger.log.store import LedgerStore

MODEL_REF = {"type": "responses_api_models", "name": "policy_model"}


@dataclass(frozen=True)
class LogShape:
    rollouts: int
    calls: int
    batch: int = 25
    padding: int = 600


def _hex(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


def exchange(model_call_id: str, index: int, *, padding: int) -> dict[str, Any]:
    """A chat or responses exchange of about ``padding + 600`` bytes, with a tool call on
    every third; one in 97 is damaged (no response, so no record can be built)."""
    started = 1764400000.25 + index
    body: dict[str, Any] = {
        "model_call_id": model_call_id,
        "model_ref": MODEL_REF,
        "started_at": started,
        "completed_at": started + 1.25,
        "latency_ms": 1250.5,
        "latency_ttft_ms": 80.0,
        "status_code": 200,
        "error_category": None,
    }
    if index % 97 == 5:
        return {**body, "dialect": "chat", "request": {"model": "policy"}, "response": None}
    if index % 2 == 0:
        message: dict[str, Any] = {"role": "assistant", "content": "y" * (padding // 2)}
        if index % 3 == 0:
            message["tool_calls"] = [
                {
                    "id": f"tool-{model_call_id}",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "x"}'},
                }
            ]
        return {
            **body,
            "dialect": "chat",
            "request": {
                "model": "policy",
                "messages": [{"role": "user", "content": "x" * (padding // 2)}],
            },
            "response": {
                "id": "chatcmpl-" + model_call_id,
                "object": "chat.completion",
                "model": "policy",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": 120 + index,
                    "completion_tokens": 80,
                    "total_tokens": 200 + index,
                },
            },
        }
    output: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "y" * (padding // 2)}],
        }
    ]
    if index % 3 == 0:
        output.insert(
            0,
            {
                "type": "function_call",
                "call_id": f"tool-{model_call_id}",
                "name": "search",
                "arguments": "{}",
            },
        )
    return {
        **body,
        "dialect": "responses",
        "request": {
            "model": "policy",
            "input": [{"role": "user", "content": "x" * (padding // 2)}],
        },
        "response": {
            "id": "resp-" + model_call_id,
            "model": "policy",
            "status": "completed",
            "output": output,
            "usage": {
                "input_tokens": 100 + index,
                "output_tokens": 20,
                "total_tokens": 120 + index,
            },
        },
    }


def lineage_row(rollout_id: str, n: int) -> CommittedRow | FailureRow:
    """Call ``n``'s committed row as a model server records it (one in 50 a failure row)."""
    call_id = f"{rollout_id}-c{n}"
    if n % 50 == 7:
        return FailureRow.model_validate({"failure_reason": "tokenizer", "model_call_id": call_id})
    prev = n * 10
    return CommittedRow.model_validate(
        {
            "model_call_id": call_id,
            "fingerprint": _hex(f"fp{call_id}"),
            "context_len": n + 1,
            "context_digest": _hex(f"ctx{call_id}"),
            "digest": _hex(f"cum{call_id}"),
            "parent_call_id": None if n == 0 else f"{rollout_id}-c{n - 1}",
            "staging_key": f"{rollout_id}/c{n}",
            "weight_version": 3,
            "prev_len": prev,
            "delta_len": 10,
            "cum_len": prev + 10,
            "staging_digest": _hex(f"st{call_id}"),
            "extras_digest": _hex("extras"),
            "mode": "text" if n == 0 else "token_in",
            "admitted_at": 1755600000.5 + n,
            "staging_chain": [f"{rollout_id}/c{i}" for i in range(max(0, n - 3), n + 1)],
            "chain_hash": _hex(f"ch{call_id}"),
            "cumulative_hash": _hex(f"cum{call_id}"),
            "response_id": f"resp-{call_id}",
            "output_fingerprint": None,
            "continuation_fingerprint": None,
            "fingerprint_version": 1,
        }
    )


def bundle(rollout_id: str, calls: int) -> dict[str, Any]:
    """A root invocation and one sub-agent, owning the calls so far, with a tool call each."""
    ids = [f"{rollout_id}-c{n}" for n in range(calls)]
    half = len(ids) // 2
    records: list[dict[str, Any]] = []
    for number, (invocation_id, owned) in enumerate((("root", ids[:half]), ("sub", ids[half:]))):
        tool = f"{rollout_id}-tool-{number}"
        records.append(
            {
                "kind": "agent_invocation",
                "invocation_id": invocation_id,
                "parent_invocation_id": None if invocation_id == "root" else "root",
                "status": "completed",
                "model_calls": [{"model_call_id": call_id} for call_id in owned],
                "conversation": [
                    {"type": "message", "role": "user", "content": "task"},
                    {"type": "function_call", "call_id": tool, "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": tool, "output": "ok"},
                ],
            }
        )
        records.append(
            {
                "kind": "tool_call",
                "invocation_id": invocation_id,
                "tool_call_id": tool,
                "tool_name": "f",
                "started_at": 1764400000.0 + number,
                "completed_at": 1764400001.0 + number,
                "timing_source": "executor",
                "status": "completed",
            }
        )
    return {"source": "varied-log", "records": records}


def result(rollout_id: str, r: int) -> dict[str, Any]:
    return {
        "task_id": f"task-{r % 7}",
        "_ng_task_index": r % 7,
        "_ng_rollout_index": r,
        "resolved": r % 3 != 0,
        "latency_ms": 1000 + r,
    }


class VariedLog:
    """Writes the log of ``shape`` into ``store``, rollout after rollout."""

    def __init__(self, store: LedgerStore, shape: LogShape) -> None:
        self.store = store
        self.shape = shape
        self.captures = CaptureService(store)
        self.lineage = LineageService(store)
        self.observations = ObservationService(store)

    async def _calls(self, rollout_id: str, first: int, last: int, *, single: bool) -> None:
        """Calls ``first`` to ``last - 1``: a lineage row and a capture each, as a model server
        writes them (the row when it commits, the capture when the call is answered)."""
        shape = self.shape
        for start in range(first, last, 1 if single else shape.batch):
            numbers = range(start, min(last, start + (1 if single else shape.batch)))
            for n in numbers:
                await self.lineage.record(rollout_id, lineage_row(rollout_id, n))
            items = [exchange(f"{rollout_id}-c{n}", n, padding=shape.padding) for n in numbers]
            if single:
                await self.captures.append(rollout_id, items[0])
            else:
                await self.captures.append_many(
                    [{"rollout_id": rollout_id, "exchange": item} for item in items]
                )

    async def rollout(self, r: int) -> None:
        shape = self.shape
        rollout_id = f"varied-{r}"
        half = shape.calls // 2
        # Even rollouts send their first half in batches, odd ones one call at a time.
        await self._calls(rollout_id, 0, half, single=r % 2 == 1)
        if r % 5 == 1:
            await self.captures.announce_pending(rollout_id, f"{rollout_id}-c{half}")
        await self.observations.record_observations(rollout_id, bundle(rollout_id, half))
        if r % 11 == 3:
            # A clear: the calls so far no longer count, the next ones restart at position 0.
            await self.captures.clear(rollout_id)
        await self._calls(rollout_id, half, shape.calls, single=r % 2 == 0)
        if r % 5 == 2:
            await self.captures.announce_pending(rollout_id, f"{rollout_id}-never")
            await self.captures.withdraw_pending(rollout_id, f"{rollout_id}-never")
        if r % 7 == 4:
            await self.captures.mark_incomplete(rollout_id, "client cancelled")
        await self.observations.record_observations(rollout_id, bundle(rollout_id, shape.calls))
        await self.observations.record_result(rollout_id, result(rollout_id, r))
        if r % 4 == 3:
            await self.lineage.retire([rollout_id])
            # A late row after the retire: discarded, not recorded.
            await self.lineage.record(rollout_id, lineage_row(rollout_id, shape.calls))
        elif r % 13 == 6:
            await self.lineage.delete([rollout_id])
            # The id used again: generation 1, captures only.
            await self._calls(rollout_id, 0, min(4, shape.calls), single=True)

    async def write(self, *, concurrently: int = 1) -> None:
        """Rollout after rollout, or ``concurrently`` at a time (as a Gym run has many rollouts
        in flight: their events interleave, and the writer batches their commands)."""
        for first in range(0, self.shape.rollouts, concurrently):
            last = min(self.shape.rollouts, first + concurrently)
            await asyncio.gather(*(self.rollout(r) for r in range(first, last)))


# Events per step of the views' follower while the log is written: small, so that its pages end
# everywhere, and it reads write-side rows that later events have already changed.
FOLLOWER_PAGE = 5


async def write_varied_log(store: LedgerStore, shape: LogShape, *, concurrently: int = 1) -> None:
    """Write the log while the views follow it, a few events a step, then bring them to the
    head: the rows are the views' as a projector keeps them."""
    follower = views_follower(store, page_events=FOLLOWER_PAGE)
    await follower.start()
    try:
        await VariedLog(store, shape).write(concurrently=concurrently)
    finally:
        await follower.stop()
    await follower.catch_up()
