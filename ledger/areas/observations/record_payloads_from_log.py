"""A whole record stored without its captured calls' payloads, which a read takes from the log.

A rollout's enriched record (one with observations or a result: ``assembled`` false) holds in
``ng_trajectory.model_calls`` each captured call's request and response (Gym's merge: the
captured value wins over the producer's). Stored as it is, every capture's payloads would be
kept twice: in its event and in ``observation_records.record``. So where an entry's value is
exactly its captured call's (the same JSON text), the stored record holds a marker naming the
call's event instead (``"\\u0000ledger:request@<seq>\\u0000"``), and a read puts the event's value
back, spelled as the whole record spells it (``compact_json`` writes a value inside an object as
it writes it alone). ``observation_records.payloads_from_log`` says a record holds markers.

A record whose text holds a marker's pattern anywhere else (free text of an observation bundle)
is stored whole: every marker in a stored record is one this module put there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ledger.areas.observations.entry_payloads import entry_payloads
from ledger.log.canonical import compact_json

# A marker as it is spelled in the stored JSON text: a string holding NUL, which no other
# value of a record spells this way unless its own text holds it (then the record is whole).
_MARKER = re.compile(r'"\\u0000ledger:(request|response)@([0-9]+)\\u0000"')
_FIELDS = ("request", "response")


@dataclass(frozen=True)
class CapturedCall:
    """Where a captured call's payloads are in the log: its event's seq and its exchange."""

    seq: int
    exchange: Mapping[str, Any]


@dataclass(frozen=True)
class StoredRecord:
    """What ``observation_records`` keeps of a whole record: its text, and whether the text
    holds markers a read fills from the log."""

    text: str
    payloads_from_log: bool


def _marker(field: str, seq: int) -> str:
    return f"\x00ledger:{field}@{seq}\x00"


def stored_record(record: Mapping[str, Any], captured: Mapping[str, CapturedCall]) -> StoredRecord:
    """The stored form of a whole record; ``captured``: the generation's captured calls by
    ``model_call_id``."""
    trajectory = record.get("ng_trajectory")
    model_calls = trajectory.get("model_calls") if isinstance(trajectory, Mapping) else None
    if not captured or not isinstance(model_calls, list):
        return StoredRecord(compact_json(record), payloads_from_log=False)
    markers = 0
    hollow_calls = []
    for entry in model_calls:
        call_id = entry.get("model_call_id") if isinstance(entry, Mapping) else None
        call = captured.get(call_id) if isinstance(call_id, str) else None
        if call is None:
            hollow_calls.append(entry)
            continue
        hollow = dict(entry)
        for field, value in zip(_FIELDS, entry_payloads(call.exchange), strict=True):
            if value is not None and compact_json(entry.get(field)) == compact_json(value):
                hollow[field] = _marker(field, call.seq)
                markers += 1
        hollow_calls.append(hollow)
    if markers:
        assert isinstance(trajectory, Mapping)
        hollow_record = {**record, "ng_trajectory": {**trajectory, "model_calls": hollow_calls}}
        text = compact_json(hollow_record)
        if len(_MARKER.findall(text)) == markers:
            return StoredRecord(text, payloads_from_log=True)
    return StoredRecord(compact_json(record), payloads_from_log=False)


def marked_seqs(text: str) -> set[int]:
    """The seqs of the events a stored record takes payloads from."""
    return {int(match[2]) for match in _MARKER.finditer(text)}


def filled_record(text: str, exchanges: Mapping[int, Mapping[str, Any]]) -> str:
    """The whole record's text: each marker replaced by its event's value (``exchanges``: each
    marked seq's exchange)."""

    def value(match: re.Match[str]) -> str:
        request, response = entry_payloads(exchanges[int(match[2])])
        return compact_json(request if match[1] == "request" else response)

    return _MARKER.sub(value, text)


def chunks(seqs: Iterable[int], size: int = 500) -> list[list[int]]:
    """Seqs in lists of at most ``size`` (one IN list a statement)."""
    ordered = sorted(seqs)
    return [ordered[start : start + size] for start in range(0, len(ordered), size)]
