"""Gym's ``error_category`` of a captured call (contract §2.5), first rule that applies."""

from __future__ import annotations

import asyncio

from ledger.gym.sse import Terminal


def status_category(status_code: int | None) -> str | None:
    if status_code is None or status_code < 400:
        return None
    if status_code in (408, 504):
        return "timeout"
    if status_code == 429:
        return "rate_limit"
    if status_code in (401, 403):
        return "auth"
    if status_code == 404:
        return "not_found"
    if status_code < 500:
        return "client_error"
    return "upstream_error"


def exception_category(error: BaseException) -> str:
    """A call that raised: cancellation, then a timeout type or name, then a connection name."""
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    name = type(error).__name__.lower()
    if isinstance(error, TimeoutError) or "timeout" in name:
        return "timeout"
    if "conn" in name:
        return "connection"
    return "exception"


def body_category(
    *,
    streaming: bool,
    terminal: Terminal | None,
    body_empty: bool,
    response_parsed: bool,
) -> str | None:
    """With no status category: what the body says (terminal event, truncation, parse)."""
    if streaming:
        if terminal == "error":
            return "upstream_error"
        if terminal == "incomplete":
            return "incomplete"
        if terminal is None:
            return "stream_truncated"
    if not body_empty and not response_parsed:
        return "capture_parse_error"
    return None
