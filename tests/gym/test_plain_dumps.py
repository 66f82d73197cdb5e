"""The hand-made dumps (``ledger.gym.plain_dumps``) give pydantic's answer or none.

``derive_call`` takes them where they answer and the models otherwise, so the derivation must
equal the one through the models alone (the reference below, what ``derive_call`` was before
the plain dumps) on every exchange: types included (``5`` is not ``5.0``), key order included.
The exchanges are generated from a seed, each field drawn from values of its own type and of
every type validation coerces, refuses or dumps otherwise.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

import pytest

from ledger.areas.captures.derivation import (
    DerivedCall,
    at_position,
    call_text,
    derive_call,
    record_text,
    record_text_at,
    trajectory_entry,
)
from ledger.gym import plain_dumps
from ledger.gym.capture_lines import CaptureExchange
from ledger.gym.model_calls import (
    PAYLOAD_FIELDS,
    ModelCallRecord,
    build_model_call_record,
    dump_with_payloads,
    record_fields,
)
from ledger.log.canonical import compact_json, is_plain_json
from tests.support.exchanges import (
    chat_exchange,
    failed_exchange,
    messages_exchange,
    responses_exchange,
)

NAN, INF = float("nan"), float("inf")
NUMBERS = [1764400000.25, 1250.5, 5, 0, True, "1.5", NAN, INF, -3.0, -0.0, 1e-7, 2**60, None]
COUNTS = [12, 0, -1, 2**63, 2**64, 12.0, True, "12", None]

FIELD_VALUES: dict[str, list[Any]] = {
    "model_call_id": ["c-1", None, 5, "x\ud800", "ünï ☃"],
    "client_session_id": ["s-1", None, 2],
    "model_ref": [
        {"type": "responses_api_models", "name": "policy"},
        {"type": "responses_api_models", "name": "policy", "extra": 1},
        {"type": "other", "name": "policy"},
        {"type": "responses_api_models"},
        {"type": "responses_api_models", "name": 7},
        {"name": "policy"},
        "policy",
        None,
    ],
    "dialect": ["chat", "responses", "messages", None, 3],
    "status_code": [200, 429, 200.0, "200", True, 200.5, None, "x", 2**70],
    "started_at": NUMBERS,
    "completed_at": NUMBERS,
    "latency_ms": NUMBERS,
    "latency_ttft_ms": NUMBERS,
    "error_category": [None, "rate_limit", 5],
    "upstream_attempted": [True, False, None, 1, "yes"],
    "response_source": ["upstream", "local", "other", None],
    "upstream_status_code": [502, None, "502", False],
    "local_response_reason": ["cached", None, 1],
    "request": [{"model": "m-req", "input": "hi"}, {"input": [1.5, None]}, None, "text", []],
    "request_raw": ["raw", None, 5],
    "response_raw": ["raw", None, 5],
}
ARGUMENTS: list[Any] = ['{"q": "x"}', "{not json", '{"x": 1e-07}', {"n": NAN}, {"k": [1, 2]}, 5]
USAGES: list[Any] = [
    {"prompt_tokens": 12, "completion_tokens": 5},
    {"input_tokens": 9, "output_tokens": 2, "cache_read_input_tokens": 3},
    {"prompt_tokens": 1.0, "completion_tokens": -5, "total_tokens": "x"},
    {"input_tokens": 2**63, "output_tokens": 1},
    None,
    "usage",
]


def _response(rng: random.Random) -> Any:
    base = rng.choice([chat_exchange, responses_exchange, messages_exchange, failed_exchange])
    response = copy.deepcopy(base(model_call_id="r")["response"])
    if not isinstance(response, dict):
        return response
    if rng.random() < 0.5:
        response["usage"] = copy.deepcopy(rng.choice(USAGES))
    if rng.random() < 0.3:
        response["status"] = rng.choice(["completed", "incomplete", 3])
    if rng.random() < 0.2:
        response["nested"] = {"value": rng.choice([1e-9, 2**70, -0.0, "text", [None]])}
    choices = response.get("choices")
    if isinstance(choices, list) and rng.random() < 0.5:
        arguments = copy.deepcopy(rng.choice(ARGUMENTS))
        choices[0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    return rng.choice([response, response, response, None, "body", [response]])


def generated_exchange(rng: random.Random) -> dict[str, Any]:
    """Half of them with a few fields drawn from every kind of value, the rest from each
    field's first two (its own type, or None)."""
    wild = rng.random() < 0.5
    exchange: dict[str, Any] = {}
    for name, values in FIELD_VALUES.items():
        if rng.random() < 0.9:  # else the key is missing
            pool = values if wild and rng.random() < 0.2 else values[:2]
            exchange[name] = copy.deepcopy(rng.choice(pool))
    exchange["response"] = _response(rng)
    return exchange


def reference_derivation(exchange: Any) -> DerivedCall:
    """``derive_call`` through the models alone."""
    try:
        built = build_model_call_record(exchange, 0)
    except ValueError:
        return DerivedCall({"damaged": True}, None, None, None)
    record = built.model_dump(mode="json", exclude=set(PAYLOAD_FIELDS))
    call = dump_with_payloads(record, exchange)
    columns = {
        "damaged": False,
        "response_id": built.response_id,
        "client_session_id": built.client_session_id,
        "model_ref_name": built.model_ref.name if built.model_ref is not None else None,
        "model": built.model,
        "dialect": built.dialect,
        "status_code": built.status_code,
        "response_status": built.response_status,
        "finish_reason": built.finish_reason,
        "error_category": built.error_category,
        "started_at": built.started_at,
        "completed_at": built.completed_at,
        "latency_total_ms": built.latency_total_ms,
        "latency_ttft_ms": built.latency_ttft_ms,
        "tokens_in": built.tokens_in,
        "tokens_out": built.tokens_out,
        "tokens_reasoning": built.tokens_reasoning,
        "tokens_total": built.tokens_total,
        "cached_tokens": built.cached_tokens,
        "cache_hit": built.cache_hit,
        "cache_creation_tokens": built.cache_creation_tokens,
        "num_tool_calls": len(built.tool_calls),
    }
    return DerivedCall(columns, record, call, trajectory_entry(call))


def _exact(derived: DerivedCall) -> str:
    # repr tells 5 from 5.0 and True from 1, and shows every dict's key order.
    return repr((derived.columns, derived.record, derived.call, derived.trajectory_entry))


def test_field_orders_are_the_models() -> None:
    fields = record_fields(chat_exchange(model_call_id="c"), 0)
    assert list(fields) == list(ModelCallRecord.model_fields)
    dump = plain_dumps.record_dump(fields)
    assert dump is not None
    assert list(dump) == [
        name for name in ModelCallRecord.model_fields if name not in PAYLOAD_FIELDS
    ]


@pytest.mark.parametrize("seed", range(8))
def test_generated_exchanges_derive_as_through_the_models(seed: int) -> None:
    rng = random.Random(seed)
    answered = asked = 0
    for _ in range(500):
        exchange = generated_exchange(rng)
        assert _exact(derive_call(exchange)) == _exact(reference_derivation(exchange)), exchange
        try:
            fields = record_fields(exchange, 0)
        except ValueError:
            continue
        if plain_dumps.record_dump(fields) is None:
            asked += 1
        else:
            answered += 1
    # Both paths ran: the comparison covered the plain dumps and the fall-back to the models.
    assert answered > 50 and asked > 50, (answered, asked)


@pytest.mark.parametrize(
    "exchange",
    [
        chat_exchange(model_call_id="chat", text="ünï ☃"),
        responses_exchange(model_call_id="responses"),
        messages_exchange(model_call_id="messages"),
        failed_exchange(model_call_id="failed"),
    ],
    ids=["chat", "responses", "messages", "failed"],
)
def test_real_exchanges_take_the_plain_dumps(exchange: dict[str, Any]) -> None:
    fields = record_fields(exchange, 0)
    record = plain_dumps.record_dump(fields)
    assert record is not None
    call = dump_with_payloads(record, exchange)
    entry = plain_dumps.trajectory_entry_text(call)
    assert isinstance(entry, str)
    assert entry == trajectory_entry(call)
    assert _exact(derive_call(exchange)) == _exact(reference_derivation(exchange))


def test_an_invalid_entry_is_none_on_both_paths() -> None:
    exchange = {**chat_exchange(model_call_id="negative"), "latency_ms": -5.0}
    derived = derive_call(exchange)
    assert derived.record is not None and derived.trajectory_entry is None
    assert _exact(derived) == _exact(reference_derivation(exchange))


def _outcome(write: Callable[..., str], *arguments: Any) -> str:
    """The text written, or the error it raised (NaN in a payload is refused either way)."""
    try:
        return write(*arguments)
    except ValueError as error:
        return f"{type(error).__name__}: {error}"


@pytest.mark.parametrize("seed", range(4))
def test_what_was_found_plain_is_written_as_when_walked(seed: int) -> None:
    """A caller's ``plain`` (the exchange walked once) changes no derivation, and the writer's
    texts from the flags ``derive_call`` found equal the ones walked in full."""
    rng = random.Random(seed)
    seen: set[tuple[bool, bool]] = set()
    for _ in range(500):
        exchange = generated_exchange(rng)
        derived = derive_call(exchange)
        if is_plain_json(exchange):
            assert _exact(derive_call(exchange, plain=True)) == _exact(derived), exchange
        if derived.call is None or derived.record is None:
            continue
        seen.add((derived.record_plain, derived.payloads_plain))
        for position in (0, 7):
            assert _outcome(record_text_at, derived, position) == _outcome(
                record_text, at_position(derived.record, position)
            )
            assert _outcome(call_text, derived, position) == _outcome(
                compact_json, at_position(derived.call, position)
            )
    # The plain dumps' records came out plain or not, with plain payloads or not.
    assert {(True, True), (False, True), (True, False)} <= seen, seen


def test_a_body_found_plain_validates_as_one_walked_for_nan() -> None:
    rng = random.Random(11)
    plain_bodies = 0
    for _ in range(300):
        body = {key: value for key, value in generated_exchange(rng).items() if key != "tool_calls"}
        try:
            expected = CaptureExchange.model_validate(body)
        except ValueError:
            continue
        assert list(expected.to_line()) == expected.line_keys()
        if is_plain_json(body):
            plain_bodies += 1
            assert CaptureExchange.validate_body(body, checked_plain=True) == expected
    assert plain_bodies > 20, plain_bodies
    with pytest.raises(ValueError, match="must not contain NaN"):
        CaptureExchange.validate_body({"response": {"x": [NAN]}}, checked_plain=False)
