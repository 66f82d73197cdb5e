"""Signed checkpoints, witness files and the comparison of a log with them (log/checkpoints.py,
log/witness.py, log/head_check.py), on every backend where a store is involved."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select, update

from ledger.log import witness
from ledger.log.checkpoint_key import load_or_create_signing_key, load_public_key
from ledger.log.checkpoints import (
    Checkpoint,
    MalformedCheckpoint,
    checkpoint_from_dict,
    parse_checkpoint,
    public_key_text,
    sign_head,
)
from ledger.log.head_check import compare_with_checkpoints, fence_problems, verify_tail
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.log.store import LedgerStore
from ledger.log.tables import events, rollouts
from ledger.log.transaction import ChainHead, WriteTransaction, read_head
from ledger.log.witness import WitnessedCheckpoint

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _signed(seq: int, chain_hash: str = "ab" * 32, key: Ed25519PrivateKey = KEY) -> Checkpoint:
    return sign_head(key, seq=seq, chain_hash=chain_hash, log_epoch="epoch-1", at=NOW)


def test_a_signed_checkpoint_checks_and_any_change_does_not() -> None:
    checkpoint = _signed(7)
    assert checkpoint.signed_by(KEY.public_key())
    assert parse_checkpoint(checkpoint.to_line()) == checkpoint
    for field, value in (("seq", 8), ("hash", "cd" * 32), ("log_epoch", "epoch-2")):
        changed = Checkpoint(**{**checkpoint.as_dict(), field: value})
        assert not changed.signed_by(KEY.public_key()), field
    assert not checkpoint.signed_by(Ed25519PrivateKey.generate().public_key())


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"seq": 0}, "seq must be a positive integer"),
        ({"seq": True}, "seq must be a positive integer"),
        ({"hash": "AB" * 32}, "hash must be 64 lowercase hex digits"),
        ({"key_id": "ab"}, "key_id must be 64 lowercase hex digits"),
        ({"format": "other/1"}, "is not 'rollout-ledger-checkpoint/1'"),
        ({"extra": 1}, "unknown field 'extra'"),
        ({"signature": None}, "signature must be a short string"),
    ],
)
def test_a_malformed_checkpoint_is_named(change: dict[str, object], named: str) -> None:
    with pytest.raises(MalformedCheckpoint, match=named):
        checkpoint_from_dict({**_signed(3).as_dict(), **change})


def test_the_key_is_created_private_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "checkpoint-key.pem"
    key = load_or_create_signing_key(path)
    assert path.stat().st_mode & 0o777 == 0o600
    again = load_or_create_signing_key(path)
    assert public_key_text(again.public_key()) == public_key_text(key.public_key())
    published = tmp_path / "published.txt"
    published.write_text(public_key_text(key.public_key()) + "\n")
    assert public_key_text(load_public_key(published)) == public_key_text(key.public_key())
    assert public_key_text(load_public_key(path)) == public_key_text(key.public_key())


def test_a_witness_file_skips_a_torn_line_and_finds_the_covering_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "checkpoints.jsonl"
    # Blocks smaller than a line: every line spans several reads backwards.
    monkeypatch.setattr(witness, "_BLOCK", 53)
    other = Ed25519PrivateKey.generate()
    for seq in (3, 9, 20, 41):
        witness.append_checkpoint(path, _signed(seq))
    witness.append_checkpoint(path, _signed(45, key=other))
    with path.open("ab") as handle:
        handle.write(b'{"format":"rollout-ledger-checkpoint/1","seq":99')  # a crash mid-append
    reading = witness.read_witness(path)
    assert [item.checkpoint.seq for item in reading.checkpoints] == [3, 9, 20, 41, 45]
    assert reading.problems == []
    assert reading.checkpoints[1].source == f"{path}:2"
    ours = _signed(1).key_id
    found = {seq: witness.earliest_covering(path, seq, ours) for seq in (1, 3, 4, 20, 21, 42)}
    assert {seq: c.seq if c else None for seq, c in found.items()} == {
        1: 3,
        3: 3,
        4: 9,
        20: 20,
        21: 41,
        42: None,  # only the other key's checkpoint reaches it
    }
    latest = witness.latest_in(path)
    assert latest is not None and latest.seq == 45
    assert witness.latest_in(tmp_path / "none.jsonl") is None


def test_a_kept_copy_is_read_as_the_route_gives_it(tmp_path: Path) -> None:
    checkpoint = _signed(12)
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps({"checkpoint": checkpoint.as_dict(), "public_key": "x"}))
    reading = witness.read_checkpoint_file(copy)
    assert [item.checkpoint for item in reading.checkpoints] == [checkpoint]
    copy.write_text(json.dumps({"checkpoint": {"seq": 1}}))
    assert "missing field 'format'" in witness.read_checkpoint_file(copy).problems[0]


async def _append_rows(store: LedgerStore, count: int, rollout_id: str = "r0") -> None:
    for n in range(count):
        await store.append(
            NewEvent(
                kind="ledger.failure_recorded",
                rollout_id=rollout_id,
                payload={"failure_reason": "worker_capture_failed", "model_call_id": f"c{n}"},
            )
        )


async def _head(store: LedgerStore) -> ChainHead:
    return await store.read_sync(read_head)


async def test_the_log_is_compared_with_its_checkpoints(store: LedgerStore) -> None:
    await _append_rows(store, 4)
    at_four = await _head(store)
    await _append_rows(store, 3)
    head = await _head(store)
    hashes: dict[int, str] = await store.read_sync(
        lambda conn: {row.seq: row.hash for row in conn.execute(select(events))}
    )
    good = [WitnessedCheckpoint(_signed(seq, hashes[seq]), f"w:{seq}") for seq in (at_four.seq, 6)]
    report = await store.read_sync(
        lambda conn: compare_with_checkpoints(conn, good, KEY.public_key())
    )
    assert report.ok and report.compared == 2 and report.latest == good[-1].checkpoint
    assert await store.read_sync(lambda conn: verify_tail(conn, good[-1].checkpoint)) is None

    beyond = WitnessedCheckpoint(_signed(head.seq + 3, "cd" * 32), "w:beyond")
    rewritten = WitnessedCheckpoint(_signed(6, "ef" * 32), "w:rewritten")
    forged = WitnessedCheckpoint(_signed(2, hashes[2], Ed25519PrivateKey.generate()), "w:forged")
    report = await store.read_sync(
        lambda conn: compare_with_checkpoints(
            conn, [good[0], rewritten, beyond, forged], KEY.public_key()
        )
    )
    assert report.problems == [
        "w:forged: the checkpoint at seq 2 is not signed by this ledger's key (key id "
        f"{forged.checkpoint.key_id[:16]}…, expected {good[0].checkpoint.key_id[:16]}…): "
        "refused",
        f"w:rewritten: at seq 6 the log has hash {hashes[6][:16]}… where the checkpoint "
        f"published {NOW.strftime('%Y-%m-%dT%H:%M:%S.%fZ')} says efefefefefefefef…: events "
        "5..6 were rewritten or removed",
        f"w:beyond: the log ends at seq 7 but reached seq 10 (hash cdcdcdcdcdcdcdcd…, "
        f"published {NOW.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}): events 8..10 are missing "
        "(lost tail)",
    ]
    assert report.latest == good[0].checkpoint
    # A tail that does not continue the checkpoint's hash is named at its first event.
    wrong = _signed(6, "ef" * 32)
    assert await store.read_sync(lambda conn: verify_tail(conn, wrong)) == (
        "hash chain at seq 7: hash does not match the chain (header, payload or predecessor "
        "changed)"
    )


async def test_fences_set_by_the_log_hold_in_the_rows(store: LedgerStore) -> None:
    await _append_rows(store, 1, "fenced")
    retired = await store.append(NewEvent(kind=ROLLOUT_RETIRED, rollout_id="fenced", payload={}))
    await store.append(NewEvent(kind=ROLLOUT_DELETED, rollout_id="gone", payload={}))
    assert await store.read_sync(fence_problems) == []

    def undo_by_hand(tx: WriteTransaction) -> None:
        tx.conn.execute(
            update(rollouts).where(rollouts.c.rollout_id == "fenced").values(state="live")
        )
        tx.conn.execute(
            update(rollouts).where(rollouts.c.rollout_id == "gone").values(generation=0)
        )

    await store.execute(undo_by_hand)
    assert await store.read_sync(fence_problems) == [
        f"rollout 'fenced' was retired at seq {retired.event.seq} (generation 0) but its row "
        "reads 'live': the fence was undone outside the ledger",
        f"rollout 'gone': generation 0 was deleted at seq {retired.event.seq + 1} but its row "
        "still reads that generation: it was changed outside the ledger",
    ]
