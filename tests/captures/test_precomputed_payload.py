"""A capture's payload is encoded once, before the writer: the stored event must be the same,
byte for byte and hash for hash, as when ``append`` encodes the payload model itself."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

import ledger.log.transaction as transaction_module
from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.derivation import DerivedCall, derive_call
from ledger.areas.captures.events import MODEL_CALL_CAPTURED, ModelCallCaptured
from ledger.areas.captures.service import (
    PreparedExchange,
    append_command,
    append_many_command,
    prepare_exchange,
)
from ledger.areas.observations.entry_payloads import filled_entry, stored_entry
from ledger.log import migrate
from ledger.log.canonical import NotStorable, canonical_bytes, compact_json, sha256_hex
from ledger.log.encoding import encode_body
from ledger.log.records import as_utc
from ledger.log.store import LedgerStore
from ledger.log.tables import events
from ledger.log.transaction import WriteTransaction
from ledger.log.verify import verify_chain, verify_projections
from tests.support.databases import sqlite_url
from tests.support.exchanges import chat_exchange, failed_exchange, messages_exchange

# Commands as the service sends them: a single capture, a batch over two rollouts, and
# exchanges whose canonical JSON holds non-ASCII text (kept as UTF-8, not escaped).
COMMANDS: list[list[tuple[str, dict[str, Any]]]] = [
    [("r1", chat_exchange(model_call_id="a"))],
    [
        ("r1", failed_exchange(model_call_id="b")),
        ("r2", messages_exchange(model_call_id="c")),
        ("r1", chat_exchange(model_call_id="d", text="grüße, 世界 🎉")),
    ],
    [("r2", chat_exchange(model_call_id="e", text='quote " backslash \\ tab \t'))],
]


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """``recorded_at`` is part of the chained header: give both runs the same clock. Returns
    a function that restarts it."""
    ticks: Iterator[int] = iter(())

    def restart() -> None:
        nonlocal ticks
        ticks = itertools.count()

    def now() -> datetime:
        return datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC) + timedelta(microseconds=next(ticks))

    restart()
    monkeypatch.setattr(transaction_module, "_now", now)
    return restart


def plain_command(
    items: list[tuple[str, dict[str, Any]]],
) -> Callable[[WriteTransaction], None]:
    """Appends the payload model, letting ``append`` encode it (the path before precomputing)."""

    def command(tx: WriteTransaction) -> None:
        for rollout_id, exchange in items:
            tx.append(
                MODEL_CALL_CAPTURED,
                ModelCallCaptured.model_construct(
                    model_call_id=exchange["model_call_id"], exchange=exchange
                ),
                rollout_id=rollout_id,
            )

    return command


async def run(url: str, *, precomputed: bool) -> list[dict[str, Any]]:
    store = LedgerStore(url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        for items in COMMANDS:
            if not precomputed:
                await store.execute(plain_command(items))
            elif len(items) == 1:
                await store.execute(append_command(prepare_exchange(*items[0])))
            else:
                prepared = [prepare_exchange(rollout_id, body) for rollout_id, body in items]
                await store.execute(append_many_command(prepared))
        async with store.read() as conn:
            chain = await verify_chain(conn)
            projections = await verify_projections(conn, store.catalogue, store.projectors)
            rows = (await conn.execute(select(events).order_by(events.c.seq))).all()
    finally:
        await store.close()
    assert chain.ok, chain.problem
    assert projections.ok, projections.differences
    return [{**row._mapping, "recorded_at": as_utc(row.recorded_at)} for row in rows]


async def test_precomputed_payload_stores_the_same_event_as_encoding_in_append(
    database_url: str, tmp_path: Path, fixed_clock: Callable[[], None]
) -> None:
    plain_url = sqlite_url(tmp_path / "plain")
    (tmp_path / "plain").mkdir()
    await migrate.upgrade(plain_url)
    plain = await run(plain_url, precomputed=False)
    fixed_clock()
    precomputed = await run(database_url, precomputed=True)

    assert len(precomputed) == 5
    # Every column: payload text, payload_sha256, recorded_at and the chained hash.
    assert precomputed == plain
    # And the payload is the canonical JSON of the model's dump, as the log format says.
    catalogue = default_catalogue()
    for row, (rollout_id, exchange) in zip(
        precomputed, [item for items in COMMANDS for item in items], strict=True
    ):
        version, body = catalogue.encode(
            MODEL_CALL_CAPTURED,
            ModelCallCaptured.model_construct(
                model_call_id=exchange["model_call_id"], exchange=exchange
            ),
        )
        text = canonical_bytes(body).decode()
        assert (row["rollout_id"], row["kind"], row["schema_version"]) == (
            rollout_id,
            MODEL_CALL_CAPTURED,
            version,
        )
        assert (row["payload"], row["payload_sha256"]) == (text, sha256_hex(text.encode()))


def test_prepared_exchange_carries_the_payload_append_stores() -> None:
    exchange = chat_exchange(model_call_id="a", text="ünï")
    prepared: PreparedExchange = prepare_exchange("r1", exchange)
    body = {"model_call_id": "a", "exchange": exchange}
    assert prepared.payload == encode_body(body)
    assert prepared.payload.text == canonical_bytes(body).decode()
    assert prepared.sha256 == sha256_hex(prepared.payload.text.encode())
    assert prepared.size == len(prepared.payload.text.encode())
    assert prepared.exchange == exchange


@pytest.mark.parametrize(
    "changes",
    [
        {},  # all plain
        {"latency_ttft_ms": 1e-05},  # orjson writes 1e-5
        {"response": {**chat_exchange(model_call_id="x")["response"], "tiny": [2.5e-7, -0.0]}},
        {"request": {"n": 2**64}},  # orjson refuses it
    ],
    ids=["plain", "small-float", "payload-float", "huge-int"],
)
def test_a_prepared_payload_is_canonical_whatever_the_body_holds(changes: dict[str, Any]) -> None:
    exchange = {**chat_exchange(model_call_id="a", text="ünï"), **changes}
    prepared = prepare_exchange("r1", exchange)
    body = {"model_call_id": "a", "exchange": exchange}
    assert prepared.payload.text == canonical_bytes(body).decode()
    # The entry stored without its payloads is filled back to the whole entry's bytes.
    derived = derive_call(exchange)
    assert isinstance(derived, DerivedCall) and derived.trajectory_entry is not None
    stored = stored_entry(derived.trajectory_entry)
    assert stored.payloads_from_log and stored.text is not None
    assert len(stored.text) < len(compact_json(derived.trajectory_entry))
    assert filled_entry(stored.text, exchange) == compact_json(derived.trajectory_entry)


def test_encode_body_refuses_an_unstorable_surrogate() -> None:
    """NaN is refused before the encoder, by the parsers at the boundary
    (tests/captures/test_capture_api.py)."""
    with pytest.raises(NotStorable, match="lone surrogate at position"):
        encode_body({"text": "\ud800"})
