"""A trajectory entry stored without its payloads is filled back to the whole entry's bytes
(areas/observations/entry_payloads.py), whatever the payloads hold; an entry whose other fields
hold a marker's text is stored whole."""

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
from ledger.log.canonical import compact_json
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
