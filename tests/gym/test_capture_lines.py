"""Capture lines (§2.3): the wire model, Gym's tolerant and strict reads, the line writer."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from ledger.gym.capture_lines import (
    CAPTURE_LINE_KEYS,
    CaptureExchange,
    parse_capture_text,
    parse_capture_text_strict,
    serialize_capture_line,
)
from ledger.gym.capture_records import read_available_records, read_records_strict

# The raw CaptureStore record of Gym's "Model-Call Capture" page (reference 000), on one line.
DOC_RAW_RECORD: dict[str, Any] = {
    "model_call_id": "863410a8d52e4be6a31efc5c6e9d4629",
    "dialect": "responses",
    "model_ref": {"type": "responses_api_models", "name": "policy_model"},
    "started_at": 1786032154.12,
    "completed_at": 1786032154.96,
    "latency_ms": 842.7,
    "latency_ttft_ms": 213.4,
    "status_code": 200,
    "error_category": None,
    "request": {
        "model": "gpt-4.1-2025-04-14",
        "input": [{"role": "user", "content": "Which option is correct?"}],
    },
    "response": {
        "id": "resp_123",
        "status": "completed",
        "usage": {"input_tokens": 94, "output_tokens": 28, "total_tokens": 122},
    },
}
DOC_LINE = json.dumps(DOC_RAW_RECORD)


def line(**values: Any) -> str:
    return json.dumps(values)


# --- tolerant read -------------------------------------------------------------------------


def test_tolerant_read_positions_and_invalid_count() -> None:
    lines = [
        line(model_call_id="a") + "\n",
        "\n",
        "   \t\n",
        "{not json\n",
        "[1, 2]\n",
        line(model_call_id="b") + "\n",
        '"just a string"\n',
        "null\n",
        "42\n",
        "",
        line(model_call_id="c"),
    ]
    exchanges, invalid = parse_capture_text(lines)
    # blank lines consume nothing; each damaged line consumes one position
    assert exchanges == [
        (0, {"model_call_id": "a"}),
        (3, {"model_call_id": "b"}),
        (7, {"model_call_id": "c"}),
    ]
    assert invalid == 5


def test_tolerant_read_of_bytes() -> None:
    lines = [DOC_LINE.encode() + b"\n", b"\n", b"\xff\xfe broken utf-8\n", b'{"x": 1}\n']
    exchanges, invalid = parse_capture_text(lines)
    assert exchanges == [(0, DOC_RAW_RECORD), (2, {"x": 1})]
    assert invalid == 1


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999", "-2E+400"])
@pytest.mark.parametrize(
    "line", ['{{"latency_ms": {0}}}', '{{"response": {{"usage": {{"input_tokens": {0}}}}}}}']
)
def test_non_finite_numbers_are_damaged_wherever_they_are(constant: str, line: str) -> None:
    """The reader is the boundary that refuses them, in the opaque payloads too: the capture
    model does not walk ``request``/``response`` (log/canonical.py, scheme 2)."""
    exchanges, invalid = parse_capture_text([line.format(constant), '{"ok": true}'])
    assert exchanges == [(1, {"ok": True})]
    assert invalid == 1


def test_tolerant_read_of_nothing() -> None:
    assert parse_capture_text([]) == ([], 0)
    assert parse_capture_text(["\n", "  "]) == ([], 0)


def test_tolerant_read_keeps_unicode() -> None:
    exchanges, _ = parse_capture_text(['{"request": {"input": "héllo ☃"}}'])
    assert exchanges[0][1]["request"]["input"] == "héllo ☃"


# --- strict read ---------------------------------------------------------------------------


def test_strict_read_skips_blank_lines() -> None:
    assert parse_capture_text_strict([DOC_LINE + "\n", "\n", "  \n", b'{"x": 1}\n']) == [
        DOC_RAW_RECORD,
        {"x": 1},
    ]


def test_strict_read_raises_json_decode_error_on_malformed_line() -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        parse_capture_text_strict([DOC_LINE, "\n", "{truncated"])
    assert "capture line 3 is malformed" in str(caught.value)


@pytest.mark.parametrize("bad", ["[1]", "7", "NaN", '{"a": Infinity}', b"\xff"])
def test_strict_read_raises_value_error_on_other_bad_lines(bad: str | bytes) -> None:
    with pytest.raises(ValueError, match="capture line 2 is malformed"):
        parse_capture_text_strict([DOC_LINE, bad])


# --- records from lines (tolerant vs strict) -----------------------------------------------


def test_tolerant_records_count_unbuildable_exchanges_as_damaged() -> None:
    bad_ref = line(model_call_id="x", model_ref={"type": "agents", "name": "a"})
    records, damaged = read_available_records(
        [DOC_LINE, "", "garbage", bad_ref, line(model_call_id="ok", status_code=500)]
    )
    assert [record.call_index for record in records] == [0, 3]
    assert [record.model_call_id for record in records] == [DOC_RAW_RECORD["model_call_id"], "ok"]
    assert damaged == 2


def test_strict_records_enumerate_and_fail_on_unbuildable_exchange() -> None:
    records = read_records_strict([DOC_LINE, "", line(model_call_id="second")])
    assert [record.call_index for record in records] == [0, 1]
    with pytest.raises(ValidationError):
        read_records_strict([DOC_LINE, line(model_ref={"type": "agents", "name": "a"})])


# --- the line writer -----------------------------------------------------------------------


def test_serialized_line_reads_back_identically() -> None:
    text = serialize_capture_line(DOC_RAW_RECORD)
    assert "\n" not in text
    assert parse_capture_text_strict([text]) == [DOC_RAW_RECORD]


def test_serialized_line_keeps_gym_key_order_and_sorts_the_rest() -> None:
    exchange = {
        "zeta": 1,
        "response": {"b": 1, "a": 2},
        "alpha": 2,
        "model_call_id": "m1",
        "dialect": "chat",
    }
    assert serialize_capture_line(exchange) == (
        '{"model_call_id": "m1", "dialect": "chat", "response": {"a": 2, "b": 1}, '
        '"alpha": 2, "zeta": 1}'
    )


def test_serialized_line_is_independent_of_input_key_order() -> None:
    reordered = dict(reversed(list(DOC_RAW_RECORD.items())))
    reordered["request"] = dict(reversed(list(DOC_RAW_RECORD["request"].items())))
    assert serialize_capture_line(reordered) == serialize_capture_line(DOC_RAW_RECORD)


def test_serialized_line_escapes_non_ascii() -> None:
    text = serialize_capture_line({"request": {"input": "héllo\u2028"}})
    assert text == '{"request": {"input": "h\\u00e9llo\\u2028"}}'
    assert text.isascii()


def test_serialized_line_stringifies_non_json_values() -> None:
    moment = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    text = serialize_capture_line({"started_at": moment, "request": {"price": Decimal("1.50")}})
    assert json.loads(text) == {
        "started_at": "2026-01-02 03:04:05+00:00",
        "request": {"price": "1.50"},
    }


def test_serialized_line_refuses_nan() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        serialize_capture_line({"latency_ms": float("nan")})


# --- the wire model ------------------------------------------------------------------------


def test_doc_record_is_a_valid_exchange_and_round_trips_to_the_same_line() -> None:
    parsed = CaptureExchange.model_validate(DOC_RAW_RECORD)
    assert parsed.to_line() == DOC_RAW_RECORD
    assert serialize_capture_line(parsed.to_line()) == serialize_capture_line(DOC_RAW_RECORD)


def test_empty_exchange_is_valid_and_writes_the_core_keys_as_null() -> None:
    assert CaptureExchange.model_validate({}).to_line() == dict.fromkeys(CAPTURE_LINE_KEYS[:11])


def test_optional_keys_are_written_only_when_set() -> None:
    values = {
        "request_raw": "x",
        "response_raw": None,
        "client_session_id": "s1",
        "upstream_attempted": True,
        "response_source": "upstream",
        "upstream_status_code": 200,
        "local_response_reason": None,
    }
    assert list(CaptureExchange.model_validate(values).to_line())[11:] == [
        "request_raw",
        "client_session_id",
        "upstream_attempted",
        "response_source",
        "upstream_status_code",
    ]


def error_locations(body: dict[str, Any]) -> list[tuple[str | int, ...]]:
    with pytest.raises(ValidationError) as caught:
        CaptureExchange.model_validate(body)
    return [error["loc"] for error in caught.value.errors()]


def test_unknown_top_level_keys_are_rejected_by_name() -> None:
    assert error_locations({"model_call_id": "a", "prompt": "x"}) == [("prompt",)]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model_call_id", ""),
        ("model_call_id", "x" * 129),
        ("model_call_id", "has space"),
        ("model_call_id", "tab\tid"),
        ("model_call_id", 42),
        ("dialect", 1),
        ("dialect", ""),
        ("model_ref", {"type": "agents", "name": "p"}),
        ("model_ref", {"type": "responses_api_models", "name": "p", "extra": 1}),
        ("model_ref", "policy_model"),
        ("started_at", "1786032154.12"),
        ("started_at", True),
        ("started_at", -1),
        ("completed_at", float("inf")),
        ("latency_ms", float("nan")),
        ("latency_ttft_ms", [1]),
        ("status_code", "200"),
        ("status_code", 200.0),
        ("status_code", True),
        ("status_code", 99),
        ("status_code", 600),
        ("error_category", 3),
        ("request", ["a"]),
        ("request", "text"),
        ("response", 5),
        ("request_raw", {"a": 1}),
        ("response_raw", 5),
        ("client_session_id", 5),
        ("upstream_attempted", "yes"),
        ("upstream_attempted", 1),
        ("response_source", "cache"),
        ("upstream_status_code", "502"),
        ("local_response_reason", False),
    ],
)
def test_wrong_types_are_rejected_naming_the_field(field: str, value: object) -> None:
    assert {location[0] for location in error_locations({field: value})} == {field}


def test_long_model_call_id_at_the_limit_is_accepted() -> None:
    assert CaptureExchange(model_call_id="x" * 128).model_call_id == "x" * 128


def test_uuid_hex_model_call_id_is_accepted() -> None:
    exchange = CaptureExchange.model_validate({"model_call_id": "863410a8d52e4be6a31efc5c6e9d4629"})
    assert exchange.model_call_id == "863410a8d52e4be6a31efc5c6e9d4629"


def test_integer_times_are_accepted() -> None:
    exchange = CaptureExchange.model_validate({"started_at": 1786032154, "latency_ms": 0})
    assert (exchange.started_at, exchange.latency_ms) == (1786032154, 0)
