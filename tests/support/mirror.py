"""Waiting for the mirror, and reading it the way Gym's readers do."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from ledger.gym.capture_lines import parse_capture_text, parse_capture_text_strict
from ledger.gym.model_calls import build_model_call_record
from ledger.log.queries import head_seq
from ledger.log.store import LedgerStore
from ledger.mirror.checkpoint import read_checkpoint


async def wait_for_mirror(store: LedgerStore, *, within_seconds: float = 120.0) -> int:
    """Poll until the mirror checkpoint reaches the head of the log; return that seq."""
    deadline = time.monotonic() + within_seconds
    while True:
        async with store.read() as conn:
            checkpoint, head = await read_checkpoint(conn), await head_seq(conn)
        if checkpoint == head:
            return head
        if time.monotonic() > deadline:
            raise AssertionError(f"mirror stuck at seq {checkpoint}, head is {head}")
        await asyncio.sleep(0.02)  # poll


def gym_tolerant_records(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Gym's tolerant read of a capture file and the records built from it (damaged counted)."""
    if not path.exists():
        return [], 0
    lines = path.read_bytes().splitlines()
    exchanges, invalid = parse_capture_text(lines)
    records = []
    for position, exchange in exchanges:
        try:
            records.append(build_model_call_record(exchange, position).model_dump(mode="json"))
        except ValueError:
            invalid += 1
    return records, invalid


def gym_strict_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    exchanges = parse_capture_text_strict(path.read_bytes().splitlines())
    return [
        build_model_call_record(exchange, index).model_dump(mode="json")
        for index, exchange in enumerate(exchanges)
    ]
