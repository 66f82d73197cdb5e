"""ModelCallRecord derivation (§2.7) and aggregation (§2.10), case by case."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ledger.gym.model_calls import (
    PAYLOAD_FIELDS,
    ModelCallRecord,
    ModelServerRef,
    ToolCall,
    aggregate_model_call_records,
    build_model_call_record,
)

POLICY_REF = {"type": "responses_api_models", "name": "policy_model"}

# The field order of the contract's table (§2.7), then the newer pass-through fields.
CONTRACT_FIELD_ORDER = [
    "model_call_id",
    "response_id",
    "client_session_id",
    "call_index",
    "model_ref",
    "model",
    "dialect",
    "status_code",
    "response_status",
    "finish_reason",
    "started_at",
    "completed_at",
    "tokens_in",
    "tokens_out",
    "tokens_reasoning",
    "tokens_total",
    "request",
    "response",
    "request_raw",
    "response_raw",
    "tool_calls",
    "reasoning_content",
    "cache_hit",
    "cached_tokens",
    "cache_creation_tokens",
    "error_category",
    "latency_total_ms",
    "latency_ttft_ms",
    "upstream_attempted",
    "response_source",
    "upstream_status_code",
    "local_response_reason",
]


def exchange(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model_call_id": "863410a8d52e4be6a31efc5c6e9d4629",
        "dialect": "responses",
        "model_ref": POLICY_REF,
        "started_at": 1786032154.12,
        "completed_at": 1786032154.96,
        "latency_ms": 842.7,
        "latency_ttft_ms": 213.4,
        "status_code": 200,
        "error_category": None,
        "request": None,
        "response": None,
    }
    base.update(overrides)
    return base


def record_of(response: Any = None, **overrides: Any) -> ModelCallRecord:
    return build_model_call_record(exchange(response=response, **overrides), 0)


# --- the three dialects end to end ---------------------------------------------------------


def test_responses_exchange() -> None:
    request = {"model": "gpt-4.1", "input": [{"role": "user", "content": "Weather?"}]}
    response = {
        "id": "resp_123",
        "object": "response",
        "model": "gpt-4.1-2025-04-14",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Think."}]},
            {"type": "function_call", "call_id": "call_1", "name": "w", "arguments": "{}"},
        ],
        "usage": {
            "input_tokens": 94,
            "input_tokens_details": {"cached_tokens": 32},
            "output_tokens": 28,
            "output_tokens_details": {"reasoning_tokens": 12},
            "total_tokens": 122,
        },
    }
    record = build_model_call_record(exchange(request=request, response=response), 3)
    assert record.model_dump() == {
        "model_call_id": "863410a8d52e4be6a31efc5c6e9d4629",
        "response_id": "resp_123",
        "client_session_id": None,
        "call_index": 3,
        "model_ref": POLICY_REF,
        "model": "gpt-4.1-2025-04-14",
        "dialect": "responses",
        "status_code": 200,
        "response_status": "incomplete",
        "finish_reason": "max_output_tokens",
        "started_at": 1786032154.12,
        "completed_at": 1786032154.96,
        "tokens_in": 94,
        "tokens_out": 28,
        "tokens_reasoning": 12,
        "tokens_total": 122,
        "request": request,
        "response": response,
        "request_raw": None,
        "response_raw": None,
        "tool_calls": [{"call_id": "call_1", "name": "w", "arguments": {}}],
        "reasoning_content": "Think.",
        "cache_hit": True,
        "cached_tokens": 32,
        "cache_creation_tokens": None,
        "error_category": None,
        "latency_total_ms": 842.7,
        "latency_ttft_ms": 213.4,
        "upstream_attempted": None,
        "response_source": None,
        "upstream_status_code": None,
        "local_response_reason": None,
    }


def test_chat_completions_exchange() -> None:
    response = {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "model": "qwen3-8b",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "Use the tool.",
                    "tool_calls": [
                        {
                            "id": "call_7",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                        }
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 50,
            "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 8},
        },
    }
    record = record_of(response, dialect="chat", request={"model": "ignored"})
    assert record.response_id == "chatcmpl-9"
    assert record.model == "qwen3-8b"
    assert record.dialect == "chat"
    assert record.response_status is None
    assert record.finish_reason == "tool_calls"
    assert (record.tokens_in, record.tokens_out, record.tokens_total) == (50, 20, 70)
    assert record.tokens_reasoning == 8
    assert (record.cached_tokens, record.cache_hit, record.cache_creation_tokens) == (
        0,
        False,
        None,
    )
    assert record.tool_calls == [ToolCall(call_id="call_7", name="add", arguments={"a": 1, "b": 2})]
    assert record.reasoning_content == "Use the tool."


def test_anthropic_messages_exchange() -> None:
    response = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "Search first."},
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}},
        ],
        "usage": {
            "input_tokens": 12,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 900,
            "output_tokens": 60,
        },
    }
    record = record_of(response, dialect="messages")
    assert record.response_id == "msg_01"
    assert record.model == "claude-sonnet-4-5"
    assert record.finish_reason == "tool_use"
    assert record.response_status is None
    assert record.tokens_in == 1012
    assert record.tokens_out == 60
    assert record.tokens_total == 1072
    assert record.tokens_reasoning is None  # unknown, never 0
    assert record.cached_tokens == 900
    assert record.cache_hit is True
    assert record.cache_creation_tokens == 100
    assert record.tool_calls == [ToolCall(call_id="toolu_1", name="search", arguments={"q": "x"})]
    assert record.reasoning_content == "Search first."


def test_dump_lists_every_field_in_contract_order() -> None:
    assert list(record_of().model_dump()) == CONTRACT_FIELD_ORDER


def test_payload_fields() -> None:
    assert PAYLOAD_FIELDS == ("request", "response", "request_raw", "response_raw")


# --- response_id ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ({"id": "resp_1"}, "resp_1"),
        ({"id": 123}, None),
        ({"id": 1.5}, None),
        ({"id": None}, None),
        ({"id": ["a"]}, None),
        ({}, None),
        (None, None),
    ],
)
def test_response_id_only_if_string(response: Any, expected: str | None) -> None:
    assert record_of(response).response_id == expected


# --- model -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_body", "response", "expected"),
    [
        ({"model": "req"}, {"model": "resp"}, "resp"),
        ({"model": "req"}, {"model": 5}, "req"),
        ({"model": "req"}, {}, "req"),
        ({"model": "req"}, None, "req"),
        ({"model": 4}, {"model": None}, None),
        (None, None, None),
    ],
)
def test_model_from_response_then_request(
    request_body: Any, response: Any, expected: str | None
) -> None:
    assert record_of(response, request=request_body).model == expected


# --- finish_reason -------------------------------------------------------------------------


FINISH_REASON_CASES: list[tuple[dict[str, Any], str | None]] = [
    (
        {
            "stop_reason": "end_turn",
            "choices": [{"finish_reason": "stop"}],
            "incomplete_details": {"reason": "max_output_tokens"},
        },
        "end_turn",
    ),
    (
        {
            "stop_reason": None,
            "choices": [{"finish_reason": "length"}],
            "incomplete_details": {"reason": "max_output_tokens"},
        },
        "length",
    ),
    (
        {
            "stop_reason": 5,
            "choices": [{"finish_reason": None}, {"finish_reason": "stop"}],
            "incomplete_details": {"reason": "content_filter"},
        },
        "content_filter",
    ),
    ({"choices": [], "incomplete_details": {"reason": "max_output_tokens"}}, "max_output_tokens"),
    ({"choices": ["stop"], "incomplete_details": None}, None),
    ({"choices": {"0": {"finish_reason": "stop"}}}, None),
    ({"incomplete_details": {"reason": 3}}, None),
    ({}, None),
]


@pytest.mark.parametrize(("response", "expected"), FINISH_REASON_CASES)
def test_finish_reason_order(response: dict[str, Any], expected: str | None) -> None:
    assert record_of(response).finish_reason == expected


# --- response_status -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "expected"),
    [({"status": "completed"}, "completed"), ({"status": 200}, None), ({}, None), (None, None)],
)
def test_response_status_only_if_string(response: Any, expected: str | None) -> None:
    assert record_of(response).response_status == expected


# --- payloads --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["text", ["a"], 5, True])
def test_request_and_response_kept_only_if_objects(value: object) -> None:
    record = build_model_call_record(exchange(request=value, response=value), 0)
    assert record.request is None
    assert record.response is None


@pytest.mark.parametrize("value", [{"a": 1}, ["a"], 5, None])
def test_raw_payloads_kept_only_if_strings(value: object) -> None:
    record = build_model_call_record(exchange(request_raw=value, response_raw=value), 0)
    assert record.request_raw is None
    assert record.response_raw is None


def test_raw_payloads_strings_are_kept() -> None:
    record = build_model_call_record(
        exchange(request_raw="not json", response_raw="data: {...}\n\n", status_code=502), 0
    )
    assert record.request_raw == "not json"
    assert record.response_raw == "data: {...}\n\n"


def test_response_in_non_object_form_derives_nothing() -> None:
    record = record_of(
        '{"id": "resp_1", "usage": {"input_tokens": 3}}', request={"model": "from-request"}
    )
    assert record.response is None
    assert record.response_id is None
    assert record.tokens_in is None
    assert record.model == "from-request"


# --- model_ref -------------------------------------------------------------------------------


def test_model_ref_is_typed() -> None:
    assert record_of().model_ref == ModelServerRef(type="responses_api_models", name="policy_model")


def test_model_ref_may_be_null() -> None:
    assert record_of(model_ref=None).model_ref is None


@pytest.mark.parametrize(
    "model_ref",
    [
        {"type": "agents", "name": "policy_model"},
        {"type": "responses_api_models"},
        {"name": "policy_model"},
        {"type": "responses_api_models", "name": 3},
        "policy_model",
        ["responses_api_models", "policy_model"],
    ],
)
def test_model_ref_with_wrong_shape_fails_to_build(model_ref: object) -> None:
    with pytest.raises(ValidationError):
        record_of(model_ref=model_ref)


def test_model_server_ref_rejects_other_types() -> None:
    with pytest.raises(ValidationError):
        ModelServerRef.model_validate({"type": "resources_servers", "name": "x"})


def test_model_ref_extra_keys_are_ignored() -> None:
    ref = record_of(model_ref={**POLICY_REF, "host": "h"}).model_ref
    assert ref is not None
    assert ref.model_dump() == POLICY_REF


# --- exchange fields copied as they are ----------------------------------------------------


def test_latency_fields() -> None:
    record = record_of(latency_ms=1234.56, latency_ttft_ms=None)
    assert record.latency_total_ms == 1234.56
    assert record.latency_ttft_ms is None


def test_integer_latency_and_timestamps_are_floats() -> None:
    record = record_of(
        latency_ms=10, latency_ttft_ms=3, started_at=1700000000, completed_at=1700000001
    )
    assert (record.latency_total_ms, record.latency_ttft_ms) == (10.0, 3.0)
    assert (record.started_at, record.completed_at) == (1700000000.0, 1700000001.0)


def test_failed_call_fields() -> None:
    record = record_of(None, status_code=429, error_category="rate_limit", response_raw="slow down")
    assert (record.status_code, record.error_category) == (429, "rate_limit")
    assert record.response_raw == "slow down"
    assert record.tokens_in is None


def test_missing_keys_give_nulls() -> None:
    record = build_model_call_record({}, 7)
    dumped = record.model_dump()
    assert dumped.pop("call_index") == 7
    assert dumped.pop("tool_calls") == []
    assert all(value is None for value in dumped.values())


@pytest.mark.parametrize(("value", "expected"), [("sess-1", "sess-1"), (5, None), ({}, None)])
def test_client_session_id_only_if_string(value: object, expected: str | None) -> None:
    assert record_of(client_session_id=value).client_session_id == expected


def test_newer_optional_fields_pass_through() -> None:
    record = record_of(
        upstream_attempted=False,
        response_source="local",
        upstream_status_code=503,
        local_response_reason="context_length_exceeded",
    )
    assert record.upstream_attempted is False
    assert record.response_source == "local"
    assert record.upstream_status_code == 503
    assert record.local_response_reason == "context_length_exceeded"


def test_unknown_exchange_keys_are_ignored() -> None:
    assert record_of(some_future_key={"x": 1}).model_call_id == "863410a8d52e4be6a31efc5c6e9d4629"


@pytest.mark.parametrize(
    "overrides",
    [
        {"status_code": "two hundred"},
        {"status_code": 200.5},
        {"started_at": "yesterday"},
        {"latency_ms": float("nan")},
        {"latency_ttft_ms": float("inf")},
        {"dialect": 5},
        {"model_call_id": 12345},
        {"error_category": ["timeout"]},
        {"response_source": "cache"},
        {"upstream_attempted": "maybe"},
    ],
)
def test_wrongly_typed_exchange_values_fail_to_build(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="validation error"):
        record_of(**overrides)


@pytest.mark.parametrize("value", [[], "line", 5, None])
def test_non_object_exchange_fails_to_build(value: Any) -> None:
    with pytest.raises(ValueError, match="must be a JSON object"):
        build_model_call_record(value, 0)


def test_record_ignores_extra_fields_on_validation() -> None:
    record = ModelCallRecord.model_validate({"call_index": 0, "surprise": 1})
    assert "surprise" not in record.model_dump()


# --- aggregation (§2.10) -------------------------------------------------------------------


def usage_record(index: int, usage: Any, latency_ms: float | None) -> ModelCallRecord:
    return build_model_call_record(
        exchange(response={"usage": usage}, latency_ms=latency_ms), index
    )


def test_aggregate_has_exactly_the_contract_keys_in_order() -> None:
    assert list(aggregate_model_call_records([])) == [
        "tokens_in",
        "tokens_out",
        "tokens_reasoning",
        "tokens_total",
        "cached_tokens",
        "latency_total_ms",
        "num_calls",
    ]


def test_aggregate_of_nothing_is_all_null_and_zero_calls() -> None:
    assert aggregate_model_call_records([]) == {
        "tokens_in": None,
        "tokens_out": None,
        "tokens_reasoning": None,
        "tokens_total": None,
        "cached_tokens": None,
        "latency_total_ms": None,
        "num_calls": 0,
    }


def test_aggregate_sums_only_known_values_and_counts_failed_calls() -> None:
    records = [
        usage_record(
            0,
            {
                "input_tokens": 10,
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "input_tokens_details": {"cached_tokens": 0},
            },
            100.5,
        ),
        usage_record(1, {"prompt_tokens": 20, "completion_tokens": 7}, 200.25),
        # a failed call: no response, no usage, but latency known
        build_model_call_record(
            exchange(status_code=500, error_category="upstream_error", latency_ms=1.0), 2
        ),
        # a call with nothing known at all
        build_model_call_record({}, 3),
    ]
    assert aggregate_model_call_records(records) == {
        "tokens_in": 30,
        "tokens_out": 12,
        "tokens_reasoning": 0,  # known zero stays 0, not null
        "tokens_total": 42,
        "cached_tokens": 0,
        "latency_total_ms": 301.75,
        "num_calls": 4,
    }


def test_aggregate_unknown_is_null_not_zero() -> None:
    anthropic = usage_record(0, {"input_tokens": 3, "output_tokens": 4}, None)
    metrics = aggregate_model_call_records([anthropic, anthropic])
    assert metrics["tokens_reasoning"] is None
    assert metrics["cached_tokens"] is None
    assert metrics["latency_total_ms"] is None
    assert metrics["tokens_in"] == 6
    assert metrics["num_calls"] == 2


def test_aggregate_value_types() -> None:
    metrics = aggregate_model_call_records([usage_record(0, {"input_tokens": 1}, 2)])
    assert isinstance(metrics["tokens_in"], int)
    assert isinstance(metrics["latency_total_ms"], float)
