"""The capture line of an observed call: raw fields and error categories (contract §2.3, §2.5)."""

from __future__ import annotations

import asyncio
import json

import pytest

from ledger.gym.capture_lines import CaptureExchange
from ledger.gym.error_categories import body_category, exception_category, status_category
from ledger.gym.observed_calls import ObservedCall, exchange_of


def observed(**changes: object) -> ObservedCall:
    values: dict[str, object] = {
        "model_call_id": "a" * 32,
        "dialect": "chat",
        "model_server": "policy",
        "started_at": 1764400000.0,
        "completed_at": 1764400001.0,
        "latency_ms": 1000.004,
        "latency_ttft_ms": 12.3456,
        "status_code": 200,
        "request_body": b'{"model": "m"}',
        "response_body": json.dumps({"id": "c", "choices": []}).encode(),
        "streaming": False,
    }
    values.update(changes)
    return ObservedCall(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "category"),
    [
        (200, None),
        (399, None),
        (408, "timeout"),
        (504, "timeout"),
        (429, "rate_limit"),
        (401, "auth"),
        (403, "auth"),
        (404, "not_found"),
        (422, "client_error"),
        (500, "upstream_error"),
        (None, None),
    ],
)
def test_status_categories(status: int | None, category: str | None) -> None:
    assert status_category(status) == category


class SomeConnectionReset(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (asyncio.CancelledError(), "cancelled"),
        (TimeoutError(), "timeout"),
        (type("ReadTimeout", (Exception,), {})(), "timeout"),
        (SomeConnectionReset(), "connection"),
        (ValueError(), "exception"),
    ],
)
def test_exception_categories(error: BaseException, category: str) -> None:
    assert exception_category(error) == category


def test_body_categories() -> None:
    assert body_category(streaming=True, terminal=None, body_empty=False, response_parsed=True) == (
        "stream_truncated"
    )
    assert body_category(
        streaming=True, terminal="error", body_empty=False, response_parsed=True
    ) == ("upstream_error")
    assert (
        body_category(streaming=True, terminal="incomplete", body_empty=False, response_parsed=True)
        == "incomplete"
    )
    assert body_category(
        streaming=False, terminal=None, body_empty=False, response_parsed=False
    ) == ("capture_parse_error")
    assert (
        body_category(streaming=False, terminal=None, body_empty=True, response_parsed=False)
        is None
    )


def test_a_plain_json_call() -> None:
    line = exchange_of(observed())
    assert line["request"] == {"model": "m"}
    assert line["response"] == {"id": "c", "choices": []}
    assert "request_raw" not in line and "response_raw" not in line
    assert (line["latency_ms"], line["latency_ttft_ms"]) == (1000.0, 12.35)
    assert line["model_ref"] == {"type": "responses_api_models", "name": "policy"}
    assert line["error_category"] is None
    CaptureExchange.model_validate(line)  # a line the captures service accepts


def test_raw_fields_only_where_gym_writes_them() -> None:
    line = exchange_of(observed(request_body=b"[1]", response_body=b"not json"))
    assert (line["request"], line["request_raw"]) == (None, "[1]")
    assert (line["response"], line["response_raw"]) == (None, "not json")
    assert line["error_category"] == "capture_parse_error"
    empty = exchange_of(observed(request_body=b"", response_body=b""))
    assert "request_raw" not in empty and "response_raw" not in empty
    assert empty["error_category"] is None
    streamed = b'data: {"choices": [{"delta": {"content": "x"}}]}\n\ndata: [DONE]\n\n'
    line = exchange_of(observed(response_body=streamed, streaming=True))
    assert line["response_raw"] == streamed.decode()
    assert line["response"]["choices"][0]["message"]["content"] == "x"
    assert line["error_category"] is None


def test_status_beats_failure_and_failure_beats_the_body() -> None:
    assert (
        exchange_of(observed(status_code=429, failure_category="cancelled"))["error_category"]
        == "rate_limit"
    )
    cut = observed(response_body=b'data: {"choices": []}\n\n', streaming=True)
    assert exchange_of(cut)["error_category"] == "stream_truncated"
    gone = observed(
        response_body=b'data: {"choices": []}\n\n', streaming=True, failure_category="cancelled"
    )
    assert exchange_of(gone)["error_category"] == "cancelled"


def test_a_call_the_upstream_never_answered() -> None:
    line = exchange_of(
        observed(
            status_code=None,
            response_body=None,
            latency_ttft_ms=None,
            failure_category="timeout",
            response_source="local",
            local_response_reason="upstream_timeout",
        )
    )
    assert (line["status_code"], line["response"], line["error_category"]) == (
        None,
        None,
        "timeout",
    )
    assert (line["response_source"], line["local_response_reason"]) == ("local", "upstream_timeout")
    assert "upstream_status_code" not in line
    CaptureExchange.model_validate(line)


def test_invalid_utf8_is_kept_with_replacement() -> None:
    line = exchange_of(observed(request_body=b"\xff{", response_body=b"\xfe"))
    assert line["request_raw"] == "\ufffd{"
    assert line["response_raw"] == "\ufffd"
