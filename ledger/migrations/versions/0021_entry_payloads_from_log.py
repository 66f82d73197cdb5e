"""A call's payloads are kept once, in its event: ``observation_calls`` loses ``call`` (the record
with payloads, which the observations view now puts together from ``capture_calls.record`` and
the event) and its trajectory entries hold a marker in place of their request and response,
which a read takes from the event (``payloads_from_log``, areas/observations/entry_payloads.py);
a whole record (``observation_records``, not a template) holds a marker naming the event where
its trajectory entry's value is the captured call's (``payloads_from_log``,
areas/observations/record_payloads_from_log.py).

No projection code is needed either way, so the rows are converted here and nothing is rebuilt:
- up, each stored entry gets its markers (the same text the view's version 2 writes);
- down, each entry is filled again and ``call`` put back together from the payload-free record
  and the event (the rows version 1 wrote).
The spelling is the standard library's compact JSON with key order kept, which is what the
view's ``compact_json`` writes; the rules (which payload an entry holds, where the payload
fields sit in a record) are frozen here as they are at this revision.

Revision ID: 0021_entry_payloads_from_log
Revises: 0020_payload_schemes
Create Date: 2026-12-06
"""

import json
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0021_entry_payloads_from_log"
down_revision: str | None = "0020_payload_schemes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Named here, not imported: the view and the versions whose rows this revision converts.
VIEW = "observations"
VERSION_BEFORE, VERSION_AFTER = 1, 2
REQUEST_MARKER = "\x00ledger:entry-request\x00"
RESPONSE_MARKER = "\x00ledger:entry-response\x00"
# A marker in a whole record, as its JSON text spells it: which value, from which event.
RECORD_MARKER = re.compile(r'"\\u0000ledger:(request|response)@([0-9]+)\\u0000"')
# A record's payload fields, in field order, and the field they come before.
PAYLOAD_FIELDS = ("request", "response", "request_raw", "response_raw")
FIELD_AFTER_PAYLOADS = "tool_calls"
PAGE = 1000

KEY = "rollout_id, generation, call_index"
SELECT_ENTRIES = (
    f"SELECT {KEY}, trajectory_entry FROM observation_calls "
    f"WHERE ({KEY}) > (:r, :g, :i) ORDER BY {KEY} LIMIT {PAGE}"
)
SELECT_FILLED = (
    "SELECT o.rollout_id, o.generation, o.call_index, o.trajectory_entry, o.payloads_from_log, "
    "c.record, e.payload FROM observation_calls o "
    "LEFT JOIN capture_calls c ON c.rollout_id = o.rollout_id AND c.generation = o.generation "
    "AND c.call_index = o.call_index LEFT JOIN events e ON e.seq = c.seq "
    "WHERE (o.rollout_id, o.generation, o.call_index) > (:r, :g, :i) "
    f"ORDER BY o.rollout_id, o.generation, o.call_index LIMIT {PAGE}"
)
WHERE_KEY = "WHERE rollout_id = :r AND generation = :g AND call_index = :i"
SELECT_RECORDS = (
    "SELECT rollout_id, generation, record FROM observation_records "
    "WHERE NOT assembled AND rollout_id > :after ORDER BY rollout_id LIMIT 100"
)
SELECT_CAPTURED = (
    "SELECT c.seq, c.model_call_id, e.payload FROM capture_calls c "
    "JOIN events e ON e.seq = c.seq WHERE c.rollout_id = :r AND c.generation = :g "
    "AND c.record IS NOT NULL"
)
SELECT_MARKED = (
    "SELECT rollout_id, record FROM observation_records "
    "WHERE payloads_from_log AND rollout_id > :after ORDER BY rollout_id LIMIT 100"
)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _pages(query: str) -> Iterator[Sequence[sa.Row[Any]]]:
    bind = op.get_bind()
    after: dict[str, Any] = {"r": "", "g": -1, "i": -1}
    while rows := bind.execute(sa.text(query), after).all():
        yield rows
        after = {"r": rows[-1][0], "g": rows[-1][1], "i": rows[-1][2]}


def _record_version(before: int, after: int) -> None:
    op.get_bind().execute(
        sa.text(
            "UPDATE projection_versions SET version = :after, updated_at = :now "
            "WHERE projection = :name AND version = :before"
        ),
        {"name": VIEW, "before": before, "after": after, "now": datetime.now(UTC)},
    )


def _hollow(text: str) -> str | None:
    """The entry with its markers; None where another field holds a marker's text."""
    hollow = _compact({**json.loads(text), "request": REQUEST_MARKER, "response": RESPONSE_MARKER})
    request, response = _compact(REQUEST_MARKER), _compact(RESPONSE_MARKER)
    once = hollow.count(request) == 1 and hollow.count(response) == 1
    return hollow if once and hollow.find(request) < hollow.find(response) else None


def upgrade() -> None:
    with op.batch_alter_table("observation_calls") as batch:
        batch.drop_column("call")
        batch.add_column(
            sa.Column("payloads_from_log", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    update = sa.text(
        "UPDATE observation_calls SET trajectory_entry = :entry, payloads_from_log = TRUE "
        + WHERE_KEY
    )
    for rows in _pages(SELECT_ENTRIES):
        changed = []
        for rollout_id, generation, call_index, text in rows:
            hollow = None if text is None else _hollow(text)
            if hollow is not None:
                changed.append({"entry": hollow, "r": rollout_id, "g": generation, "i": call_index})
        if changed:
            op.get_bind().execute(update, changed)
    _records_up()
    _record_version(VERSION_BEFORE, VERSION_AFTER)


def _hollow_record(record: dict[str, Any], captured: dict[str, tuple[int, Any]]) -> str | None:
    """The record with a marker where an entry's value is its captured call's; None: whole."""
    trajectory = record.get("ng_trajectory")
    calls = trajectory.get("model_calls") if isinstance(trajectory, dict) else None
    if not captured or not isinstance(calls, list):
        return None
    markers, hollow_calls = 0, []
    for entry in calls:
        found = captured.get(entry.get("model_call_id")) if isinstance(entry, dict) else None
        if found is None:
            hollow_calls.append(entry)
            continue
        seq, exchange = found
        hollow = dict(entry)
        for name, value in _entry_payloads(_payloads(exchange)).items():
            if value is not None and _compact(entry.get(name)) == _compact(value):
                hollow[name] = f"\x00ledger:{name}@{seq}\x00"
                markers += 1
        hollow_calls.append(hollow)
    if not markers:
        return None
    assert isinstance(trajectory, dict)
    text = _compact({**record, "ng_trajectory": {**trajectory, "model_calls": hollow_calls}})
    return text if len(RECORD_MARKER.findall(text)) == markers else None


def _records_up() -> None:
    bind = op.get_bind()
    # Not a batch (a copy of the table on SQLite): the SQL views over the table stay valid.
    op.add_column(
        "observation_records",
        sa.Column("payloads_from_log", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    update = sa.text(
        "UPDATE observation_records SET record = :record, payloads_from_log = TRUE "
        "WHERE rollout_id = :r"
    )
    after = ""
    while rows := bind.execute(sa.text(SELECT_RECORDS), {"after": after}).all():
        after = rows[-1][0]
        for rollout_id, generation, text in rows:
            found = bind.execute(sa.text(SELECT_CAPTURED), {"r": rollout_id, "g": generation})
            captured = {
                str(call_id): (int(seq), json.loads(payload)["exchange"])
                for seq, call_id, payload in found
                if payload is not None
            }
            hollow = _hollow_record(json.loads(text), captured)
            if hollow is not None:
                bind.execute(update, {"record": hollow, "r": rollout_id})


def _filled_record(text: str, values: dict[int, dict[str, Any]]) -> str:
    return RECORD_MARKER.sub(lambda match: _compact(values[int(match[2])][match[1]]), text)


def _records_down() -> None:
    bind = op.get_bind()
    update = sa.text("UPDATE observation_records SET record = :record WHERE rollout_id = :r")
    after = ""
    while rows := bind.execute(sa.text(SELECT_MARKED), {"after": after}).all():
        after = rows[-1][0]
        for rollout_id, text in rows:
            seqs = sorted({int(match[2]) for match in RECORD_MARKER.finditer(text)})
            found = bind.execute(
                sa.text("SELECT seq, payload FROM events WHERE seq IN :seqs").bindparams(
                    sa.bindparam("seqs", expanding=True)
                ),
                {"seqs": seqs},
            )
            values = {
                int(seq): _entry_payloads(_payloads(json.loads(payload)["exchange"]))
                for seq, payload in found
            }
            bind.execute(update, {"record": _filled_record(text, values), "r": rollout_id})
    # Both backends drop a column in place (SQLite since 3.35), the SQL views left as they are.
    op.execute("ALTER TABLE observation_records DROP COLUMN payloads_from_log")


def _payloads(exchange: Any) -> dict[str, Any]:
    """A record's payload fields from its exchange (objects and strings only)."""
    fields = {}
    for name in PAYLOAD_FIELDS:
        value = exchange.get(name) if isinstance(exchange, dict) else None
        wanted = str if name.endswith("_raw") else dict
        fields[name] = value if isinstance(value, wanted) else None
    return fields


def _entry_payloads(payloads: dict[str, Any]) -> dict[str, Any]:
    """An entry's request and response: the parsed payload, else the raw text."""
    return {
        name: payloads[name] if payloads[name] is not None else payloads[f"{name}_raw"]
        for name in ("request", "response")
    }


def _call(record: dict[str, Any], payloads: dict[str, Any]) -> dict[str, Any]:
    call: dict[str, Any] = {}
    for name, value in record.items():
        if name == FIELD_AFTER_PAYLOADS:
            call.update(payloads)
        call[name] = value
    return call


def downgrade() -> None:
    _records_down()
    with op.batch_alter_table("observation_calls") as batch:
        batch.add_column(sa.Column("call", sa.Text(), nullable=False, server_default=""))
    update = sa.text(
        "UPDATE observation_calls SET call = :call, trajectory_entry = :entry " + WHERE_KEY
    )
    for rows in _pages(SELECT_FILLED):
        changed = []
        for rollout_id, generation, call_index, entry, from_log, record, payload in rows:
            if record is None or payload is None:
                continue  # no record or payload to put back (the view would be rebuilt)
            payloads = _payloads(json.loads(payload)["exchange"])
            call = _compact(_call(json.loads(record), payloads))
            if entry is not None and from_log:
                entry = _compact({**json.loads(entry), **_entry_payloads(payloads)})
            changed.append(
                {"call": call, "entry": entry, "r": rollout_id, "g": generation, "i": call_index}
            )
        if changed:
            op.get_bind().execute(update, changed)
    with op.batch_alter_table("observation_calls") as batch:
        batch.drop_column("payloads_from_log")
    _record_version(VERSION_AFTER, VERSION_BEFORE)
