"""The "floor" leg of ``bench verify``: a ceiling for the projection check written with no
pydantic and no record at all, so that the 20,000 events/s target can be set against the least
code that still rebuilds one projection from the log.

It reads the log in the same pages as verify, parses every payload (the one thing any rebuild
must do), keeps each rollout generation's capture positions (a clear or a tombstone forgets
them), derives from each exchange only the capture projection's plain columns, by hand, with
no validation (token usage by the contract's own ``extract_token_stats``, a dataclass), and
compares them with the live ``capture_calls`` rows streamed in key order. It builds no
``ModelCallRecord``, no payload-free record text, no trajectory entry, no enriched record, and
no lineage, state, observation or tool-call row: a strict subset of the lean leg's work
(benchmarks/lean_verify.py), itself a subset of verify's. Its events/s is therefore an upper
bound for any projection check in one Python process on this machine, however its Gym rules
are written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from ledger.areas.captures.events import CAPTURE_CLEARED, MODEL_CALL_CAPTURED, MODEL_CALL_DAMAGED
from ledger.areas.captures.tables import capture_calls
from ledger.gym.usage import extract_token_stats
from ledger.log.canonical import parse_json
from ledger.log.rollout_events import ROLLOUT_DELETED
from ledger.log.verify import read_pages

# The columns derived here, in the order ``_columns`` returns them.
COMPARED = (
    "response_id",
    "model",
    "dialect",
    "status_code",
    "started_at",
    "completed_at",
    "latency_total_ms",
    "tokens_in",
    "tokens_out",
    "tokens_total",
)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _columns(exchange: Mapping[str, Any]) -> tuple[Any, ...]:
    response = exchange.get("response")
    body: Mapping[str, Any] = response if isinstance(response, Mapping) else {}
    model = _text(body.get("model"))
    if model is None:
        request = exchange.get("request")
        if isinstance(request, Mapping):
            model = _text(request.get("model"))
    tokens = extract_token_stats(response)
    return (
        _text(body.get("id")),
        model,
        exchange.get("dialect"),
        exchange.get("status_code"),
        exchange.get("started_at"),
        exchange.get("completed_at"),
        exchange.get("latency_ms"),
        tokens.tokens_in,
        tokens.tokens_out,
        tokens.tokens_total,
    )


async def floor_verify(engine: AsyncEngine) -> tuple[int, int]:
    """(events read, differences found) for the log behind ``engine``."""
    # rollout id -> (generation, the derived columns per position; None for a damaged one)
    positions: dict[str, tuple[int, list[tuple[Any, ...] | None]]] = {}
    events = 0
    async for rows in read_pages(engine):
        events += len(rows)
        for row in rows:
            kind, rollout_id, generation, text = row[2], row[4], row[5], row[7]
            payload = parse_json(text) if text is not None else None
            if rollout_id is None:
                continue
            if kind == ROLLOUT_DELETED:
                positions.pop(rollout_id, None)
                continue
            held = positions.get(rollout_id)
            if held is None or held[0] != generation:
                held = positions[rollout_id] = (generation, [])
            if kind == MODEL_CALL_CAPTURED and payload is not None:
                held[1].append(_columns(payload["exchange"]))
            elif kind == MODEL_CALL_DAMAGED:
                held[1].append(None)
            elif kind == CAPTURE_CLEARED:
                held[1].clear()
    differences = 0
    compared = [capture_calls.c[name] for name in COMPARED]
    query = select(
        capture_calls.c.rollout_id, capture_calls.c.call_index, capture_calls.c.damaged, *compared
    ).order_by(*capture_calls.primary_key.columns)
    async with engine.connect() as conn:
        for rollout_id, call_index, damaged, *stored in await conn.execute(query):
            held = positions.get(rollout_id)
            if held is None or call_index >= len(held[1]):
                differences += 1
                continue
            derived = held[1][call_index]
            if derived is None or damaged:
                # A damaged row holds no columns; one the floor cannot tell is skipped.
                differences += derived is None and not damaged
                continue
            differences += tuple(stored) != derived
    return events, differences
