"""Revision 0020 (payloads written by orjson) on both backends, with data: the events the code
before it wrote keep their bytes and verify, the events written since are orjson's, and
``verify`` tells a payload spelled by the other scheme.

``v1_events.json`` holds the rows of tests/log/chain_pins.py's scenario as the code before
revision 0020 wrote them (their hashes are ``PINNED_STANDARD``): the floats below 1e-4 in them
are spelled as the standard library spells them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.service import CaptureService
from ledger.log import encoding, migrate
from ledger.log.canonical import sha256_hex, standard_json
from ledger.log.chain import canonical_header, chain_hash
from ledger.log.engines import create_async_db_engine
from ledger.log.errors import Conflict
from ledger.log.payload_schemes import RANGE_PREFIX, read_scheme_ranges
from ledger.log.store import LedgerStore
from ledger.log.tables import events, log_identity
from ledger.log.verify import header_of, verify_chain
from tests.log.chain_pins import PINNED_STANDARD, exchange
from tests.observations.support import EXAMPLE_OBSERVATIONS

BEFORE = "0019_view_status"
# What verify reports when event 2's bytes are not its scheme's: one event verified before it.
SPELLED_OTHERWISE_AT_2 = (False, 1, 2, "payload is not in its canonical form (scheme 2)")
V1_EVENTS = Path(__file__).with_name("v1_events.json")


def v1_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(V1_EVENTS.read_text())
    for row in rows:
        row["recorded_at"] = datetime.fromisoformat(row["recorded_at"]).replace(tzinfo=UTC)
    return rows


async def _append_capture(url: str, model_call_id: str, extra: dict[str, Any]) -> None:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        await CaptureService(store).append("after", exchange(model_call_id, extra))
    finally:
        await store.close()


async def _payload(engine: AsyncEngine, seq: int) -> str:
    async with engine.connect() as conn:
        text = (await conn.execute(select(events.c.payload).where(events.c.seq == seq))).scalar()
    assert isinstance(text, str)
    return text


async def _chain(engine: AsyncEngine) -> tuple[bool, int, int | None, str | None]:
    async with engine.connect() as conn:
        report = await verify_chain(conn)
    return report.ok, report.events, report.first_bad_seq, report.problem


HEADER_FIELDS = (
    "seq",
    "recorded_at",
    "kind",
    "schema_version",
    "rollout_id",
    "generation",
    "idempotency_key",
)


async def _rewrite(
    conn: AsyncConnection, seq: int, payload: str, payload_sha256: str, row_hash: str
) -> None:
    """Rewrite a stored event past the log's refusal of updates (as damage would)."""
    sqlite = conn.dialect.name == "sqlite"
    if sqlite:
        await conn.execute(text("DROP TRIGGER IF EXISTS events_refuse_update"))
    else:
        await conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
    await conn.execute(
        update(events)
        .where(events.c.seq == seq)
        .values(payload=payload, payload_sha256=payload_sha256, hash=row_hash)
    )
    if not sqlite:
        await conn.execute(text("ALTER TABLE events ENABLE TRIGGER USER"))


async def _v1_log_upgraded(url: str) -> AsyncEngine:
    """The rows the code before revision 0020 wrote (their hashes are the old pins), in a log
    at revision 0019, then upgraded to head; an engine on it."""
    rows = v1_rows()
    assert [(r["seq"], r["payload_sha256"], r["hash"]) for r in rows] == PINNED_STANDARD
    await migrate.upgrade(url, BEFORE)
    engine = create_async_db_engine(url, null_pool=True)
    async with engine.begin() as conn:
        await conn.execute(insert(events), rows)
    await migrate.upgrade(url)
    return engine


async def test_the_events_before_the_upgrade_keep_their_bytes_and_those_after_are_orjsons(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    engine = await _v1_log_upgraded(url)
    try:
        async with engine.connect() as conn:
            ranges = await read_scheme_ranges(conn)
        assert ranges.orjson == [(13, None)]
        assert await _chain(engine) == (True, 12, None, None)
        # A float below 1e-4 in event 2 as the standard library spells it, and kept so.
        assert '"tiny":[1e-07,' in await _payload(engine, 2)

        await _append_capture(url, "after-1", {"tiny": [1e-07, 9.5e-05]})
        assert '"tiny":[1e-7,0.000095]' in await _payload(engine, 13)
        assert await _chain(engine) == (True, 13, None, None)

        # Down: the range closes at the head, and the code before writes scheme 1 again (its
        # bytes, inserted here as it would append them); up again: another range opens.
        await migrate.downgrade(url, BEFORE)
        async with engine.connect() as conn:
            assert (await read_scheme_ranges(conn)).orjson == [(13, 13)]
            last = (await conn.execute(select(events).where(events.c.seq == 13))).one()
        old_style = {"model_call_id": "old-14", "exchange": {"n": [1e-07]}}
        old_text = standard_json(old_style)
        payload_sha = sha256_hex(old_text.encode())
        row = {**v1_rows()[1], "seq": 14, "payload": old_text, "payload_sha256": payload_sha}
        row["idempotency_key"] = None
        header = canonical_header(
            **{name: row[name] for name in HEADER_FIELDS},
        )
        async with engine.begin() as conn:
            await conn.execute(
                insert(events), [{**row, "hash": chain_hash(last.hash, header, payload_sha)}]
            )
        await migrate.upgrade(url)
        async with engine.connect() as conn:
            assert (await read_scheme_ranges(conn)).orjson == [(13, 13), (15, None)]
        assert await _chain(engine) == (True, 14, None, None)
        await _append_capture(url, "after-2", {"tiny": [2.5e-07]})
        assert '"tiny":[2.5e-7]' in await _payload(engine, 15)
        assert await _chain(engine) == (True, 15, None, None)
    finally:
        await engine.dispose()


async def test_verify_names_a_payload_its_scheme_would_spell_otherwise(
    empty_database_url: str,
) -> None:
    """The stored bytes of an orjson event rewritten in the standard library's spelling, with
    its payload hash and the chain after it made consistent again: only the spelling check can
    see it. And a log whose ranges claimed the events before the upgrade for orjson fails on
    the first that holds such a float."""
    url = empty_database_url
    await migrate.upgrade(url)
    await _append_capture(url, "a", {"n": 1})
    await _append_capture(url, "b", {"tiny": [1e-07]})
    await _append_capture(url, "c", {"n": 3})
    engine = create_async_db_engine(url, null_pool=True)
    try:
        assert await _chain(engine) == (True, 3, None, None)
        async with engine.begin() as conn:
            stored = (await conn.execute(select(events).order_by(events.c.seq))).all()
            respelled = stored[1].payload.replace('"tiny":[1e-7]', '"tiny":[1e-07]')
            assert respelled != stored[1].payload
            prev_hash = stored[0].hash
            for row in stored[1:]:
                payload = respelled if row.seq == 2 else row.payload
                payload_sha = sha256_hex(payload.encode())
                row_hash = chain_hash(prev_hash, header_of(row), payload_sha)
                await _rewrite(conn, row.seq, payload, payload_sha, row_hash)
                prev_hash = row_hash
        assert await _chain(engine) == SPELLED_OTHERWISE_AT_2
    finally:
        await engine.dispose()


async def test_a_log_whose_ranges_claim_older_events_for_orjson_fails_on_the_first_that_differs(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    engine = await _v1_log_upgraded(url)
    try:
        assert await _chain(engine) == (True, 12, None, None)
        async with engine.begin() as conn:
            await conn.execute(
                update(log_identity)
                .where(log_identity.c.name == f"{RANGE_PREFIX}13")
                .values(name=f"{RANGE_PREFIX}1")
            )
        # Event 1 holds integers beyond 64 bits (both schemes write it alike); event 2 does not.
        assert await _chain(engine) == SPELLED_OTHERWISE_AT_2
    finally:
        await engine.dispose()


async def test_a_capture_stored_before_the_upgrade_is_repeated_not_refused(
    store: LedgerStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client sending a capture again after the upgrade (a retry) gets the idempotent answer:
    its stored hash is of the scheme 1 bytes, the repeat's of scheme 2, and the value is the
    same. Another exchange under that model_call_id is still refused."""
    captures = CaptureService(store)
    sent = exchange("retried", {"tiny": [1e-07, 9.5e-05]})
    with monkeypatch.context() as before_upgrade:
        before_upgrade.setattr(encoding, "canonical_bytes", lambda v: standard_json(v).encode())
        first = await captures.append("r1", sent)
    assert first.created
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        assert '"tiny":[1e-07,9.5e-05]' in await _payload(engine, first.seq)
    finally:
        await engine.dispose()
    again = await captures.append("r1", sent)
    assert (again.created, again.seq, again.call_index) == (False, first.seq, first.call_index)
    with pytest.raises(Conflict, match="with a different exchange"):
        await captures.append("r1", exchange("retried", {"tiny": [2e-07]}))


async def test_an_idempotency_key_sent_again_after_the_upgrade_is_a_repeat(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log's own idempotency (``Idempotency-Key``) compares payload hashes too: a bundle
    with a float below 1e-4, stored with scheme 1 bytes, sent again after the upgrade is a 200
    repeat, and another bundle under that key is still a 409."""
    headers = {"Idempotency-Key": "bundle-tiny"}
    url = "/v1/rollouts/r1/observations"
    invocation, tool_call = EXAMPLE_OBSERVATIONS["records"]
    bundle = {
        **EXAMPLE_OBSERVATIONS,
        "records": [invocation, {**tool_call, "duration_ms": 2.5e-05}],
    }
    with monkeypatch.context() as before_upgrade:
        before_upgrade.setattr(encoding, "canonical_bytes", lambda v: standard_json(v).encode())
        first = await client.post(url, json=bundle, headers=headers)
    assert first.status_code == 201, first.text
    again = await client.post(url, json=bundle, headers=headers)
    assert again.status_code == 200, again.text
    assert first.json() == {**again.json(), "created": True}
    other = await client.post(url, json={**bundle, "source": "x"}, headers=headers)
    assert other.status_code == 409
