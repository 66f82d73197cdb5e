"""The ``ng_model_call_capture`` attachment (§6.1) and the merge gaps (§5.3)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ledger.gym.capture_attachment import (
    CAPTURE_GAP_INCOMPLETE,
    CAPTURE_GAP_NO_RECORDS,
    CAPTURE_GAP_PENDING,
    CAPTURE_GAP_RECORDS_UNREADABLE,
    CAPTURE_GAP_UNREADABLE,
    build_capture_attachment,
    capture_gap,
    capture_gaps,
    strip_payloads,
)
from ledger.gym.capture_lines import serialize_capture_line
from ledger.gym.capture_records import read_available_records
from ledger.gym.model_calls import PAYLOAD_FIELDS, build_model_call_record

# The attachment example of Gym's "Model-Call Capture" page (reference 000), verbatim.
DOC_ATTACHMENT: dict[str, Any] = {
    "rollout_id": "0-0",
    "metrics": {
        "tokens_in": 94,
        "tokens_out": 28,
        "tokens_reasoning": 12,
        "tokens_total": 122,
        "cached_tokens": 0,
        "latency_total_ms": 842.7,
        "num_calls": 1,
    },
    "calls": [
        {
            "model_call_id": "863410a8d52e4be6a31efc5c6e9d4629",
            "response_id": "resp_123",
            "call_index": 0,
            "model_ref": {"type": "responses_api_models", "name": "policy_model"},
            "model": "gpt-4.1-2025-04-14",
            "dialect": "responses",
            "status_code": 200,
            "response_status": "completed",
            "tokens_in": 94,
            "tokens_out": 28,
            "tokens_reasoning": 12,
            "tokens_total": 122,
            "latency_total_ms": 842.7,
        }
    ],
    "gaps": [{"code": "model_call_capture_incomplete"}],
}

# The page's raw CaptureStore record; the page's usage omits the details behind the attachment's
# reasoning (12) and cached (0) counts, so they are added in the Responses API's own fields.
DOC_EXCHANGE: dict[str, Any] = {
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
        "usage": {
            "input_tokens": 94,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 28,
            "output_tokens_details": {"reasoning_tokens": 12},
            "total_tokens": 122,
        },
    },
}


def doc_attachment_from_capture_file(*, include_payloads: bool) -> dict[str, Any]:
    """What the merge makes of a capture file holding the doc's exchange plus the marker."""
    records, damaged = read_available_records([serialize_capture_line(DOC_EXCHANGE) + "\n"])
    gaps = capture_gaps(
        has_evidence=True,
        record_count=len(records),
        damaged_count=damaged,
        incomplete=True,
        pending=False,
    )
    return build_capture_attachment("0-0", records, gaps, include_payloads=include_payloads)


def test_worked_example_of_the_gym_docs() -> None:
    attachment = doc_attachment_from_capture_file(include_payloads=False)
    assert list(attachment) == ["rollout_id", "metrics", "calls", "gaps"]
    assert attachment["rollout_id"] == DOC_ATTACHMENT["rollout_id"]
    assert attachment["metrics"] == DOC_ATTACHMENT["metrics"]
    assert attachment["gaps"] == DOC_ATTACHMENT["gaps"]
    (call,) = attachment["calls"]
    (doc_call,) = DOC_ATTACHMENT["calls"]
    # The page shows a representative subset of the call's fields; every one must match ...
    assert {key: call[key] for key in doc_call} == doc_call
    # ... and the page's key order is the record's order.
    assert [key for key in call if key in doc_call] == list(doc_call)
    # The rest are all there, null where unknown, payloads left out.
    assert call["client_session_id"] is None
    assert call["latency_ttft_ms"] == 213.4
    assert call["cached_tokens"] == 0
    assert call["cache_hit"] is False
    assert call["tool_calls"] == []
    assert not set(PAYLOAD_FIELDS) & set(call)


def test_worked_example_is_json_serialisable_as_is() -> None:
    attachment = doc_attachment_from_capture_file(include_payloads=True)
    assert json.loads(json.dumps(attachment, allow_nan=False)) == attachment


def test_doc_raw_record_without_details_has_unknown_reasoning_and_cache() -> None:
    exchange = copy.deepcopy(DOC_EXCHANGE)
    exchange["response"]["usage"] = {"input_tokens": 94, "output_tokens": 28, "total_tokens": 122}
    record = build_model_call_record(exchange, 0)
    metrics = build_capture_attachment("0-0", [record], [], include_payloads=False)["metrics"]
    assert metrics["tokens_reasoning"] is None
    assert metrics["cached_tokens"] is None
    assert metrics["tokens_total"] == 122


# --- payloads ------------------------------------------------------------------------------


def test_payloads_included_on_request() -> None:
    (call,) = doc_attachment_from_capture_file(include_payloads=True)["calls"]
    assert call["request"] == DOC_EXCHANGE["request"]
    assert call["response"] == DOC_EXCHANGE["response"]
    assert call["request_raw"] is None
    assert call["response_raw"] is None


def test_strip_payloads_removes_exactly_the_four_keys() -> None:
    call: dict[str, Any] = {
        "model_call_id": "m",
        "request": {},
        "response": None,
        "request_raw": "x",
        "response_raw": None,
        "tool_calls": [],
    }
    assert strip_payloads(call) == {"model_call_id": "m", "tool_calls": []}
    assert "request" in call  # the input is left untouched


def test_calls_keep_every_non_payload_field_including_nulls() -> None:
    record = build_model_call_record({}, 0)
    (call,) = build_capture_attachment("r", [record], [], include_payloads=False)["calls"]
    expected = [key for key in record.model_dump() if key not in PAYLOAD_FIELDS]
    assert list(call) == expected
    assert call["model_ref"] is None


def test_calls_in_the_given_order_with_their_indexes() -> None:
    records = [build_model_call_record({"model_call_id": f"c{i}"}, i * 2) for i in range(3)]
    calls = build_capture_attachment("r", records, [], include_payloads=False)["calls"]
    assert [(call["model_call_id"], call["call_index"]) for call in calls] == [
        ("c0", 0),
        ("c1", 2),
        ("c2", 4),
    ]


# --- gaps key ------------------------------------------------------------------------------


def test_gaps_key_absent_when_there_are_no_gaps() -> None:
    record = build_model_call_record(DOC_EXCHANGE, 0)
    attachment = build_capture_attachment("0-0", [record], [], include_payloads=False)
    assert list(attachment) == ["rollout_id", "metrics", "calls"]


def test_gaps_are_serialised_without_null_fields() -> None:
    gaps = [
        {
            "code": "model_call_capture_records_unreadable",
            "invocation_id": None,
            "detail": "count=2",
        },
        {"code": "model_call_capture_incomplete", "invocation_id": None, "detail": None},
    ]
    attachment = build_capture_attachment("r", [], gaps, include_payloads=False)
    assert attachment["gaps"] == [
        {"code": "model_call_capture_records_unreadable", "detail": "count=2"},
        {"code": "model_call_capture_incomplete"},
    ]


def test_empty_rollout_attachment() -> None:
    gaps = capture_gaps(
        has_evidence=False, record_count=0, damaged_count=0, incomplete=False, pending=False
    )
    assert build_capture_attachment("7-1-a2", [], gaps, include_payloads=True) == {
        "rollout_id": "7-1-a2",
        "metrics": {
            "tokens_in": None,
            "tokens_out": None,
            "tokens_reasoning": None,
            "tokens_total": None,
            "cached_tokens": None,
            "latency_total_ms": None,
            "num_calls": 0,
        },
        "calls": [],
        "gaps": [{"code": "model_call_capture_no_records"}],
    }


# --- gap rules -----------------------------------------------------------------------------


def test_gap_codes_are_gyms() -> None:
    assert CAPTURE_GAP_NO_RECORDS == "model_call_capture_no_records"
    assert CAPTURE_GAP_RECORDS_UNREADABLE == "model_call_capture_records_unreadable"
    assert CAPTURE_GAP_INCOMPLETE == "model_call_capture_incomplete"
    assert CAPTURE_GAP_PENDING == "model_call_capture_pending"
    assert CAPTURE_GAP_UNREADABLE == "model_call_capture_unreadable"


GAP_CASES: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
    # no capture file and no marker at all
    (
        {"has_evidence": False, "record_count": 0, "damaged_count": 0, "incomplete": False},
        [{"code": "model_call_capture_no_records"}],
    ),
    # a file with zero records and zero damaged lines (e.g. only blank lines)
    (
        {"has_evidence": True, "record_count": 0, "damaged_count": 0, "incomplete": False},
        [{"code": "model_call_capture_no_records"}],
    ),
    # records, nothing wrong
    ({"has_evidence": True, "record_count": 3, "damaged_count": 0, "incomplete": False}, []),
    # only damaged lines: they are evidence, so no "no_records"
    (
        {"has_evidence": True, "record_count": 0, "damaged_count": 2, "incomplete": False},
        [{"code": "model_call_capture_records_unreadable", "detail": "count=2"}],
    ),
    (
        {"has_evidence": True, "record_count": 5, "damaged_count": 1, "incomplete": False},
        [{"code": "model_call_capture_records_unreadable", "detail": "count=1"}],
    ),
    # the marker alone: a failed write, and only that (Gym adds no_records only without one)
    (
        {"has_evidence": True, "record_count": 0, "damaged_count": 0, "incomplete": True},
        [{"code": "model_call_capture_incomplete"}],
    ),
    # the marker and only damaged lines
    (
        {"has_evidence": True, "record_count": 0, "damaged_count": 2, "incomplete": True},
        [
            {"code": "model_call_capture_records_unreadable", "detail": "count=2"},
            {"code": "model_call_capture_incomplete"},
        ],
    ),
    (
        {"has_evidence": True, "record_count": 4, "damaged_count": 0, "incomplete": True},
        [{"code": "model_call_capture_incomplete"}],
    ),
    (
        {"has_evidence": True, "record_count": 4, "damaged_count": 3, "incomplete": True},
        [
            {"code": "model_call_capture_records_unreadable", "detail": "count=3"},
            {"code": "model_call_capture_incomplete"},
        ],
    ),
]


@pytest.mark.parametrize(("inputs", "expected"), GAP_CASES)
def test_capture_gaps(inputs: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    assert capture_gaps(**inputs, pending=False) == expected


def test_pending_gap_comes_last() -> None:
    assert capture_gaps(
        has_evidence=True, record_count=1, damaged_count=1, incomplete=True, pending=True
    ) == [
        {"code": "model_call_capture_records_unreadable", "detail": "count=1"},
        {"code": "model_call_capture_incomplete"},
        {"code": "model_call_capture_pending"},
    ]


def test_pending_with_no_evidence_yet() -> None:
    assert capture_gaps(
        has_evidence=False, record_count=0, damaged_count=0, incomplete=False, pending=True
    ) == [{"code": "model_call_capture_no_records"}, {"code": "model_call_capture_pending"}]


def test_capture_gap_leaves_out_null_fields() -> None:
    assert capture_gap(CAPTURE_GAP_UNREADABLE) == {"code": "model_call_capture_unreadable"}
    assert capture_gap("x", invocation_id="inv", detail="d") == {
        "code": "x",
        "invocation_id": "inv",
        "detail": "d",
    }


def test_damaged_lines_from_a_real_file_become_the_unreadable_gap() -> None:
    lines = [
        serialize_capture_line(DOC_EXCHANGE),
        "{cut off",
        json.dumps({"model_ref": {"type": "agents", "name": "x"}}),
        "",
        serialize_capture_line({**DOC_EXCHANGE, "model_call_id": "second"}),
    ]
    records, damaged = read_available_records(lines)
    gaps = capture_gaps(
        has_evidence=True,
        record_count=len(records),
        damaged_count=damaged,
        incomplete=False,
        pending=False,
    )
    attachment = build_capture_attachment("0-0", records, gaps, include_payloads=False)
    assert [call["call_index"] for call in attachment["calls"]] == [0, 3]
    assert attachment["metrics"]["num_calls"] == 2
    assert attachment["metrics"]["tokens_in"] == 188
    assert attachment["gaps"] == [
        {"code": "model_call_capture_records_unreadable", "detail": "count=2"}
    ]
