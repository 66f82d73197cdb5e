"""Builders for observation tests: capture calls in Gym's ModelCallRecord dump shape."""

from __future__ import annotations

from typing import Any

MODEL_CALL_RECORD_FIELDS: dict[str, Any] = {
    "model_call_id": None,
    "response_id": None,
    "client_session_id": None,
    "call_index": 0,
    "model_ref": None,
    "model": None,
    "dialect": None,
    "status_code": None,
    "response_status": None,
    "finish_reason": None,
    "started_at": None,
    "completed_at": None,
    "tokens_in": None,
    "tokens_out": None,
    "tokens_reasoning": None,
    "tokens_total": None,
    "request": None,
    "response": None,
    "request_raw": None,
    "response_raw": None,
    "tool_calls": [],
    "reasoning_content": None,
    "cache_hit": None,
    "cached_tokens": None,
    "cache_creation_tokens": None,
    "error_category": None,
    "latency_total_ms": None,
    "latency_ttft_ms": None,
}


def capture_call(**fields: Any) -> dict[str, Any]:
    """A full ModelCallRecord dump (every field, nulls included), with ``fields`` set."""
    unknown = (
        set(fields)
        - set(MODEL_CALL_RECORD_FIELDS)
        - {
            "upstream_attempted",
            "response_source",
            "upstream_status_code",
            "local_response_reason",
        }
    )
    assert not unknown, f"not ModelCallRecord fields: {unknown}"
    return {**MODEL_CALL_RECORD_FIELDS, **fields}


def model_ref(name: str = "policy") -> dict[str, str]:
    return {"type": "responses_api_models", "name": name}


def assert_shows(actual: Any, expected: Any, path: str = "$") -> None:
    """``actual`` carries every value ``expected`` shows (dict keys may be extra; lists exact)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{path}: missing key {key!r} in {actual!r}"
            assert_shows(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: expected a list, got {actual!r}"
        assert len(actual) == len(expected), f"{path}: {len(actual)} items, expected {expected!r}"
        for index, (item, want) in enumerate(zip(actual, expected, strict=True)):
            assert_shows(item, want, f"{path}[{index}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
        assert type(actual) is type(expected) or {type(actual), type(expected)} <= {int, float}, (
            f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
        )
