"""A trajectory entry or a whole record stored without its captured payloads is filled back to
the whole bytes (areas/observations/entry_payloads.py, record_payloads_from_log.py), whatever the
payloads hold; one whose other fields hold a marker's text is stored whole."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.areas.captures.derivation import derive_call
from ledger.areas.observations.entry_payloads import (
    REQUEST_MARKER,
    RESPONSE_MARKER,
    filled_entry,
    stored_entry,
)
from ledger.areas.observations.record_payloads_from_log import (
    CapturedCall,
    filled_record,
    marked_seqs,
    stored_record,
)
from ledger.gym.capture_attachment import build_capture_attachment
from ledger.gym.model_calls import build_model_call_record
from ledger.gym.record import RolloutEvidence, enrich_record
from ledger.gym.result import RolloutResult
from ledger.log.canonical import compact_json
from tests.observations.support import EXAMPLE_RESULT
from tests.support.exchanges import chat_exchange, messages_exchange, responses_exchange


def _chat(**changes: Any) -> dict[str, Any]:
    return {**chat_exchange(model_call_id="c", text="ünï \u2028 \x7f"), **changes}


EXCHANGES = {
    "chat": _chat(),
    "responses": responses_exchange(model_call_id="r"),
    "messages": messages_exchange(model_call_id="m"),
    "raw-text": _chat(request=None, response=None, request_raw="{", response_raw="x"),
    "no-payloads": _chat(request=None, response=None),
    "empty-objects": _chat(request={}, response={}),
    "small-floats": _chat(request={"t": 1e-05, "u": [2.5e-7, -0.0, 1e16]}),
    "huge-int": _chat(request={"n": 2**64}),
    # The markers' text inside the payloads themselves: the stored entry never holds them.
    "markers-in-payloads": _chat(
        request={"a": RESPONSE_MARKER, "b": REQUEST_MARKER},
        response={**_chat()["response"], "note": REQUEST_MARKER},
    ),
}


@pytest.mark.parametrize("exchange", EXCHANGES.values(), ids=list(EXCHANGES))
def test_a_stored_entry_fills_back_to_the_whole_entry(exchange: dict[str, Any]) -> None:
    entry = derive_call(exchange).trajectory_entry
    assert entry is not None
    stored = stored_entry(entry)
    assert stored.payloads_from_log and stored.text is not None
    whole = compact_json(entry)
    assert filled_entry(stored.text, exchange) == whole
    # What is stored is the entry with the markers, nothing of the payloads.
    hollow = {**entry, "request": REQUEST_MARKER, "response": RESPONSE_MARKER}
    assert stored.text == compact_json(hollow)


def test_an_entry_holding_a_markers_text_elsewhere_is_stored_whole() -> None:
    entry = derive_call(chat_exchange(model_call_id="c")).trajectory_entry
    assert entry is not None
    marked = {**entry, "response_metadata": {**entry["response_metadata"], "x": REQUEST_MARKER}}
    stored = stored_entry(marked)
    assert not stored.payloads_from_log
    assert stored.text == compact_json(marked)


def test_an_underivable_entry_is_stored_as_none() -> None:
    assert stored_entry(None).text is None and not stored_entry(None).payloads_from_log


# ---- whole records (record_payloads_from_log.py) ---------------------------------------------


def _whole_record(exchanges: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A rollout's enriched record with a result (Gym's pipeline), and its calls by id."""
    records = [build_model_call_record(e, index) for index, e in enumerate(exchanges)]
    capture = build_capture_attachment("r", records, [], include_payloads=True)
    result = RolloutResult.model_validate(EXAMPLE_RESULT)
    record = enrich_record(RolloutEvidence(rollout_id="r", capture=capture, result=result))
    captured = {e["model_call_id"]: CapturedCall(10 + n, e) for n, e in enumerate(exchanges)}
    return record, captured


def test_a_whole_record_fills_back_to_its_text() -> None:
    exchanges = [EXCHANGES[name] for name in ("chat", "raw-text", "small-floats", "huge-int")]
    exchanges = [{**e, "model_call_id": f"c{n}"} for n, e in enumerate(exchanges)]
    record, captured = _whole_record(exchanges)
    stored = stored_record(record, captured)
    assert stored.payloads_from_log
    assert marked_seqs(stored.text) == {10, 11, 12, 13}
    by_seq = {call.seq: call.exchange for call in captured.values()}
    assert filled_record(stored.text, by_seq) == compact_json(record)
    assert len(stored.text) < len(compact_json(record))


def test_a_whole_record_holding_a_markers_pattern_elsewhere_is_stored_whole() -> None:
    record, captured = _whole_record([{**EXCHANGES["chat"], "model_call_id": "c0"}])
    record = {**record, "note": "\x00ledger:request@10\x00"}
    stored = stored_record(record, captured)
    assert not stored.payloads_from_log and stored.text == compact_json(record)
