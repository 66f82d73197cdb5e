"""A call's trajectory entry stored without its payloads, which a read takes from its event.

A call's entry in ``ng_trajectory.model_calls`` holds the exchange's request and response
(Gym's rule: the parsed payload, else the raw text). Stored whole, every capture's payloads
would be kept twice: in its event and in ``observation_calls.trajectory_entry``. So the entry is
stored with a marker in place of each of the two values (``payloads_from_log`` true), and a read
puts back the values of the call's event (``capture_calls.seq``), spelled as the whole entry
spells them: ``compact_json`` writes a value inside an object as it writes it alone.

An entry whose other fields happen to hold a marker's text is stored whole (``payloads_from_log``
false), so a marker in a stored entry is always the one this module put there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger.gym.model_calls import record_payloads
from ledger.gym.trajectory import trajectory_model_call
from ledger.log.canonical import compact_json

REQUEST_MARKER = "\x00ledger:entry-request\x00"
RESPONSE_MARKER = "\x00ledger:entry-response\x00"
_QUOTED_REQUEST = compact_json(REQUEST_MARKER)
_QUOTED_RESPONSE = compact_json(RESPONSE_MARKER)


@dataclass(frozen=True)
class StoredEntry:
    """What ``observation_calls`` keeps of a call's entry: ``text`` (None: not derivable) and
    whether its request and response are markers filled from the event."""

    text: str | None
    payloads_from_log: bool


def stored_entry(entry: Mapping[str, Any] | None) -> StoredEntry:
    """The stored form of an entry (a ``TrajectoryModelCall`` JSON-mode dump)."""
    if entry is None:
        return StoredEntry(None, payloads_from_log=False)
    hollow = compact_json({**entry, "request": REQUEST_MARKER, "response": RESPONSE_MARKER})
    request_at = hollow.find(_QUOTED_REQUEST)
    if (
        hollow.count(_QUOTED_REQUEST) == 1
        and hollow.count(_QUOTED_RESPONSE) == 1
        and request_at < hollow.find(_QUOTED_RESPONSE)
    ):
        return StoredEntry(hollow, payloads_from_log=True)
    return StoredEntry(compact_json(entry), payloads_from_log=False)


def entry_payloads(exchange: Mapping[str, Any]) -> tuple[Any, Any]:
    """The request and response a call's entry holds, by the rule the entry was derived with
    (``trajectory_model_call`` over the record's payload fields)."""
    entry = trajectory_model_call(record_payloads(exchange))
    return entry["request"], entry["response"]


def filled_entry(text: str, exchange: Mapping[str, Any]) -> str:
    """The whole entry's text: a stored entry with ``payloads_from_log`` filled from the
    call's exchange (the ``exchange`` of its ``model_call.captured`` event)."""
    request, response = entry_payloads(exchange)
    before, rest = text.split(_QUOTED_REQUEST, 1)
    between, after = rest.split(_QUOTED_RESPONSE, 1)
    return before + compact_json(request) + between + compact_json(response) + after
