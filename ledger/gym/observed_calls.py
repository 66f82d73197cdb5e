"""A model call as a capturing proxy observed it, and the capture line Gym derives from it.

This is the middleware half of Gym's capture (contract §2.3-§2.6): the bytes that went each way,
the status, the timings and how the call ended become one exchange line: ``request`` and
``response`` parsed (a stream reassembled), ``request_raw`` / ``response_raw`` only where Gym
writes them, and ``error_category`` by Gym's rules. Pure; no I/O.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from ledger.gym.dialects import Dialect
from ledger.gym.error_categories import body_category, status_category
from ledger.gym.sse import parse_stream, stream_terminal
from ledger.gym.stream_reassembly import reassemble_stream

MODEL_SERVER_TYPE = "responses_api_models"


@dataclass(frozen=True)
class ObservedCall:
    model_call_id: str
    dialect: Dialect
    model_server: str
    started_at: float
    completed_at: float
    latency_ms: float
    latency_ttft_ms: float | None
    # The status the upstream answered with; None when it never answered.
    status_code: int | None
    request_body: bytes
    # What came back, as far as it was kept; None when nothing was kept: no answer came
    # (``status_code`` None), or the answer was over the capture limit (``response_over_limit``).
    response_body: bytes | None
    streaming: bool
    # How the call ended when it did not end normally (client gone, timeout, connection).
    failure_category: str | None = None
    client_session_id: str | None = None
    response_source: Literal["upstream", "local"] = "upstream"
    local_response_reason: str | None = None
    # An answer came and its body was dropped at the capture limit (the client had it whole).
    response_over_limit: bool = False


def is_finite_json(value: object) -> bool:
    """True when no float inside ``value`` is NaN or infinite. The bodies of an observed call
    are read by Python's ``json``, which takes ``NaN`` and ``Infinity``; they are not JSON, and
    the log's payload encoding expects every boundary to have refused them (log/canonical.py),
    so the proxy checks what it derived before it appends."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True


def _parse_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except ValueError:  # not UTF-8 or not JSON
        return None
    return value if isinstance(value, dict) else None


def _text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def exchange_of(call: ObservedCall) -> dict[str, Any]:
    """The capture line (Gym's keys) of one observed call."""
    request = _parse_object(call.request_body)
    body = call.response_body or b""
    terminal = None
    if call.streaming:
        blocks = parse_stream(_text(body))
        terminal = stream_terminal(call.dialect, blocks)
        response = reassemble_stream(call.dialect, blocks)
    else:
        response = _parse_object(body) if body else None
    category = status_category(call.status_code) or call.failure_category
    if category is None and call.response_body is not None:
        category = body_category(
            streaming=call.streaming,
            terminal=terminal,
            body_empty=not body,
            response_parsed=response is not None,
        )
    exchange: dict[str, Any] = {
        "model_call_id": call.model_call_id,
        "dialect": call.dialect,
        "model_ref": {"type": MODEL_SERVER_TYPE, "name": call.model_server},
        "started_at": call.started_at,
        "completed_at": call.completed_at,
        "latency_ms": _round(call.latency_ms),
        "latency_ttft_ms": _round(call.latency_ttft_ms),
        "status_code": call.status_code,
        "error_category": category,
        "request": request,
        "response": response,
    }
    # request_raw: a body that is not a JSON object (an empty body has nothing to keep).
    if request is None and call.request_body:
        exchange["request_raw"] = _text(call.request_body)
    # response_raw: a non-empty body that was streamed, or that is not a JSON object.
    if body and (call.streaming or response is None):
        exchange["response_raw"] = _text(body)
    if call.client_session_id is not None:
        exchange["client_session_id"] = call.client_session_id
    exchange["upstream_attempted"] = True
    exchange["response_source"] = call.response_source
    if call.status_code is not None:
        exchange["upstream_status_code"] = call.status_code
    if call.local_response_reason is not None:
        exchange["local_response_reason"] = call.local_response_reason
    return exchange
