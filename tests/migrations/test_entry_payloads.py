"""Revision 0021 with captures in the database, on both backends: a call's payloads are kept
once, in its event. Down, ``observation_calls`` gets back ``call`` (the record with payloads) and
whole entries, the rows the code before wrote; up again, the entries are the same rows as
before, converted without projection code, so nothing is stale or rebuilt, every record reads
the same and ``ledger verify`` passes."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, text

from ledger.app.areas import default_catalogue, default_projectors, write_side_projectors
from ledger.app.bootstrap import catch_up_views, ensure_database_ready, upgrade_database
from ledger.areas.captures.service import CaptureService
from ledger.areas.observations.entry_payloads import REQUEST_MARKER
from ledger.areas.observations.queries import read_record_text
from ledger.areas.observations.service import ObservationService
from ledger.gym.model_calls import build_model_call_record
from ledger.log import migrate
from ledger.log.store import LedgerStore
from ledger.log.verify import verify_projections
from tests.observations.support import EXAMPLE_RESULT
from tests.support.databases import run_on
from tests.support.exchanges import chat_exchange, messages_exchange, responses_exchange

BEFORE = "0020_payload_schemes"
ROLLOUTS = ("r0", "r1", "r2", "raw")


def _store(url: str) -> LedgerStore:
    return LedgerStore(url, default_catalogue(), write_side_projectors())


def _exchanges() -> list[tuple[str, dict[str, Any]]]:
    made = [
        (f"r{n % 3}", make(model_call_id=f"c{n}"))
        for n, make in enumerate([chat_exchange, responses_exchange, messages_exchange] * 2)
    ]
    # Raw text in place of the parsed payloads: the entry holds the raw text.
    raw = {**chat_exchange(model_call_id="raw0"), "request": None, "response": None}
    made.append(("raw", {**raw, "request_raw": '{"model": "m"', "response_raw": "oops"}))
    return made


def _calls(conn: Connection) -> list[tuple[Any, ...]]:
    query = (
        "SELECT rollout_id, generation, call_index, trajectory_entry, payloads_from_log "
        "FROM observation_calls ORDER BY rollout_id, call_index"
    )
    return [(*row[:4], bool(row[4])) for row in conn.execute(text(query))]


def _old_calls(conn: Connection) -> dict[tuple[str, int], tuple[str, str | None]]:
    query = "SELECT rollout_id, call_index, call, trajectory_entry FROM observation_calls"
    return {(row[0], row[1]): (row[2], row[3]) for row in conn.execute(text(query))}


def _stored_records(conn: Connection) -> dict[str, tuple[str, bool]]:
    query = "SELECT rollout_id, record, payloads_from_log FROM observation_records"
    return {row[0]: (row[1], bool(row[2])) for row in conn.execute(text(query))}


def _old_records(conn: Connection) -> dict[str, str]:
    query = "SELECT rollout_id, record FROM observation_records"
    return {row[0]: row[1] for row in conn.execute(text(query))}


def _version(conn: Connection) -> int:
    query = "SELECT version FROM projection_versions WHERE projection = 'observations'"
    return int(conn.execute(text(query)).scalar_one())


async def _records(store: LedgerStore) -> dict[str, str | None]:
    async with store.read() as conn:
        return {rollout_id: await read_record_text(conn, rollout_id) for rollout_id in ROLLOUTS}


async def test_0021_down_and_up_with_captures(empty_database_url: str) -> None:
    url = empty_database_url
    await migrate.upgrade(url)
    await upgrade_database(url)  # records the projections' versions, as `ledger db upgrade`
    exchanges = _exchanges()
    store = _store(url)
    await store.open()
    try:
        captures = CaptureService(store)
        for rollout_id, exchange in exchanges:
            await captures.append(rollout_id, exchange)
        await ObservationService(store).record_result("r2", EXAMPLE_RESULT)  # a whole record
        await catch_up_views(store)
        records = await _records(store)
    finally:
        await store.close()
    calls = await run_on(url, _calls)
    assert len(calls) == len(exchanges)
    # Every entry is stored without its payloads (tests/observations/test_entry_payloads.py
    # has the entries stored whole).
    assert all(row[4] and json.loads(row[3])["request"] == REQUEST_MARKER for row in calls)

    stored = await run_on(url, _stored_records)
    # The whole record (r2 has a result) names its calls' events; the templates do not.
    assert {rollout_id for rollout_id, (_, marked) in stored.items() if marked} == {"r2"}
    assert "ledger:request@" in stored["r2"][0] and "ledger:response@" in stored["r2"][0]

    await migrate.downgrade(url, BEFORE)
    # The whole record as the code before stores it: the bytes a read gave.
    assert (await run_on(url, _old_records))["r2"] == records["r2"]
    old = await run_on(url, _old_calls)
    positions: dict[str, int] = {}
    for rollout_id, exchange in exchanges:
        index = positions[rollout_id] = positions.get(rollout_id, -1) + 1
        call, entry = old[(rollout_id, index)]
        # The rows the code before writes: the record with payloads, in field order...
        built = build_model_call_record(exchange, index).model_dump(mode="json")
        assert list(json.loads(call).items()) == list(built.items())
        # ...and the whole entry, its payloads by Gym's rule (the raw text if not parsed).
        assert entry is not None
        request = exchange["request"] if exchange["request"] is not None else "{" + '"model": "m"'
        assert json.loads(entry)["request"] == request
        assert json.loads(entry)["response"] == (exchange["response"] or "oops")
    assert await run_on(url, _version) == 1

    await migrate.upgrade(url)
    await ensure_database_ready(url)  # servable as it is: nothing stale
    rebuild = await upgrade_database(url)
    assert rebuild is not None and rebuild.stale == []
    assert await run_on(url, _version) == 2
    assert await run_on(url, _calls) == calls
    assert await run_on(url, _stored_records) == stored
    store = _store(url)
    await store.open()
    try:
        assert await _records(store) == records
        async with store.read() as conn:
            report = await verify_projections(
                conn, store.catalogue, default_projectors(check_templates=True)
            )
        assert report.ok, report.differences
    finally:
        await store.close()
