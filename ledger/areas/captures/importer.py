"""Importing a Gym ``model_call_capture_dir``: every capture line and marker becomes an event.

Files are streamed line by line in bounded chunks (memory stays flat on multi-GB directories).
Positions follow Gym's tolerant read: blank lines are skipped, every other line consumes one;
a line that is not a JSON object is kept as a ``model_call.damaged`` event (its text unchanged)
so the rollout's view reports it as ``model_call_capture_records_unreadable``.

Re-running adds nothing: each line's event carries the idempotency key
``capture-import:<sha256(rollout id, position, line bytes)>``, each marker
``capture-import-incomplete:<sha256(rollout id)>``.

``<id>.tokens.intents`` files (Gym's intents, written before dispatch) are recorded as
``model_call.intent_recorded``, once per call id (areas/evidence); Gym's other token-store
files (``.tokens.jsonl``, ``.tokens.lock``, ...) are not read.

With a run label, each rollout is labelled before its files are read; a rollout that holds
another label is left out (reported), since its evidence belongs to another run.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ledger.areas.captures.events import (
    CAPTURE_MARKED_INCOMPLETE,
    MODEL_CALL_CAPTURED,
    MODEL_CALL_DAMAGED,
    CaptureMarkedIncomplete,
    ModelCallCaptured,
    ModelCallDamaged,
)
from ledger.areas.captures.projection import exchange_payload
from ledger.areas.captures.queries import find_call, load_state
from ledger.areas.evidence.intent_lines import (
    INTENTS_SUFFIX,
    parse_intent_lines,
    rollout_of_intents,
)
from ledger.areas.evidence.service import MAX_INTENTS, record_intents_in
from ledger.areas.runs.commands import RunLabelConflict, apply_label, check_label
from ledger.gym.capture_lines import parse_capture_text
from ledger.gym.finite_json import NUL_MESSAGE, holds_nul
from ledger.gym.ids import is_valid_rollout_id
from ledger.log.canonical import sha256_hex
from ledger.log.encoding import holds_same_payload
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction

CAPTURE_SUFFIX = ".capture.jsonl"
INCOMPLETE_SUFFIX = ".capture.incomplete"
CHUNK_LINES = 500
CHUNK_BYTES = 4 * 1024 * 1024
MAX_STORED_MODEL_CALL_ID = 200

Progress = Callable[[int], None]


@dataclass
class CaptureImportSummary:
    files: int = 0
    rollouts: set[str] = field(default_factory=set)
    lines: int = 0
    captured: int = 0
    damaged: int = 0
    already_present: int = 0
    conflicting_ids: int = 0
    markers: int = 0
    intents: int = 0  # recorded now (an intent already recorded is not counted)
    unreadable_intents: int = 0
    skipped_files: list[str] = field(default_factory=list)
    labelled: int = 0
    # Rollouts that hold another run label: their files were not imported.
    label_conflicts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CaptureLine:
    position: int
    raw: bytes


@dataclass
class LineOutcome:
    captured: int = 0
    damaged: int = 0
    already_present: int = 0
    conflicting_ids: int = 0


def _line_key(rollout_id: str, position: int, raw: bytes) -> str:
    digest = hashlib.sha256(f"{rollout_id}\0{position}\0".encode())
    digest.update(raw)
    return "capture-import:" + digest.hexdigest()


def _stored_model_call_id(exchange: dict[str, Any]) -> str | None:
    value = exchange.get("model_call_id")
    if isinstance(value, str) and 0 < len(value) <= MAX_STORED_MODEL_CALL_ID:
        return value
    return None


def import_line(
    tx: WriteTransaction,
    rollout_id: str,
    line: CaptureLine,
    outcome: LineOutcome,
    *,
    key: str | None = None,
) -> None:
    """One capture line as an event (captured, or damaged evidence), or nothing when the same
    exchange is already stored. ``key`` defaults to this importer's key; the live follower
    passes its own (derived from the file's checkpoint and the line's byte offset)."""
    if key is None:
        key = _line_key(rollout_id, line.position, line.raw)
    if tx.find_by_idempotency_key(key) is not None:
        outcome.already_present += 1
        return
    exchanges, _invalid = parse_capture_text([line.raw])
    damage: str | None = None
    if not exchanges:
        damage = "not a JSON object"
    else:
        exchange = exchanges[0][1]
        model_call_id = _stored_model_call_id(exchange)
        try:
            payload = exchange_payload(model_call_id, exchange)
        except ValueError as exc:  # a lone surrogate
            damage = f"not storable JSON ({exc})"
        else:
            # JSON text spells a NUL only as an escape: the walk runs only for such a line.
            if b"\\u0000" in line.raw and holds_nul(exchange):
                damage = NUL_MESSAGE
            elif model_call_id is not None:
                generation = tx.generation_of(rollout_id)
                existing = find_call(tx.conn, rollout_id, generation, model_call_id)
                if existing is not None and holds_same_payload(existing.exchange_sha256, payload):
                    outcome.already_present += 1
                    return
                if existing is not None:
                    outcome.conflicting_ids += 1
                    damage = f"model_call_id {model_call_id!r} repeats an earlier, different call"
    if damage is None:
        tx.append(
            MODEL_CALL_CAPTURED,
            ModelCallCaptured.model_construct(model_call_id=model_call_id, exchange=exchange),
            rollout_id=rollout_id,
            idempotency_key=key,
        )
        outcome.captured += 1
        return
    text = line.raw.decode("utf-8", errors="replace")
    tx.append(
        MODEL_CALL_DAMAGED,
        ModelCallDamaged(raw_line=text, reason=damage),
        rollout_id=rollout_id,
        idempotency_key=key,
    )
    outcome.damaged += 1


def _chunk_command(
    rollout_id: str, lines: list[CaptureLine]
) -> Callable[[WriteTransaction], LineOutcome]:
    def command(tx: WriteTransaction) -> LineOutcome:
        outcome = LineOutcome()
        for line in lines:
            import_line(tx, rollout_id, line, outcome)
        return outcome

    return command


def _marker_command(rollout_id: str) -> Callable[[WriteTransaction], bool]:
    key = "capture-import-incomplete:" + sha256_hex(rollout_id.encode())

    def command(tx: WriteTransaction) -> bool:
        if tx.find_by_idempotency_key(key) is not None:
            return False
        generation = tx.generation_of(rollout_id)
        if load_state(tx.conn, rollout_id, generation).incomplete:
            return False
        tx.append(
            CAPTURE_MARKED_INCOMPLETE,
            CaptureMarkedIncomplete(reason="imported marker"),
            rollout_id=rollout_id,
            idempotency_key=key,
        )
        return True

    return command


async def _import_intents(
    store: LedgerStore, rollout_id: str, path: Path, summary: CaptureImportSummary
) -> None:
    """Every line, as Gym's reader takes them (a finished run: a last line without its
    newline is read too)."""
    data = await asyncio.to_thread(path.read_bytes)
    parsed = parse_intent_lines(data.splitlines())
    summary.unreadable_intents += parsed.unreadable
    for start in range(0, len(parsed.ids), MAX_INTENTS):
        ids = parsed.ids[start : start + MAX_INTENTS]
        receipt = await store.execute(
            partial(record_intents_in, rollout_id=rollout_id, model_call_ids=ids)
        )
        summary.intents += len(receipt.recorded)


def _label_command(rollout_id: str, run: str) -> Callable[[WriteTransaction], bool]:
    def command(tx: WriteTransaction) -> bool:
        return apply_label(tx, check_label(tx, rollout_id, run)) is not None

    return command


def _chunks(path: Path, progress: Progress | None) -> Iterator[list[CaptureLine]]:
    """Non-blank lines with their tolerant-read positions, a bounded chunk at a time."""
    chunk: list[CaptureLine] = []
    size = 0
    position = 0
    with path.open("rb") as handle:
        for raw in handle:
            if progress is not None:
                progress(len(raw))
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if not line.strip():
                continue
            chunk.append(CaptureLine(position, line))
            position += 1
            size += len(line)
            if len(chunk) >= CHUNK_LINES or size >= CHUNK_BYTES:
                yield chunk
                chunk, size = [], 0
    if chunk:
        yield chunk


def scan_capture_dir(directory: Path) -> tuple[int, int]:
    """(number of capture files and markers, total bytes) for a progress bar."""
    files = total = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_file() and entry.name.endswith((CAPTURE_SUFFIX, INCOMPLETE_SUFFIX)):
                files += 1
                total += entry.stat().st_size
    return files, total


async def import_capture_dir(
    store: LedgerStore,
    directory: Path,
    *,
    progress: Progress | None = None,
    run: str | None = None,
) -> CaptureImportSummary:
    """Import every capture file and marker; with ``run``, label each rollout first."""
    summary = CaptureImportSummary()
    checked: set[str] = set()
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.is_file():
                continue
            name = entry.name
            if name.endswith(CAPTURE_SUFFIX):
                rollout_id = name[: -len(CAPTURE_SUFFIX)]
            elif name.endswith(INCOMPLETE_SUFFIX):
                rollout_id = name[: -len(INCOMPLETE_SUFFIX)]
            elif name.endswith(INTENTS_SUFFIX):
                rollout_id = rollout_of_intents(name) or ""
            else:
                continue
            if not is_valid_rollout_id(rollout_id):
                summary.skipped_files.append(name)
                continue
            if run is not None and rollout_id not in checked:
                checked.add(rollout_id)
                try:
                    summary.labelled += await store.execute(_label_command(rollout_id, run))
                except RunLabelConflict as exc:
                    summary.label_conflicts[rollout_id] = exc.message
            if rollout_id in summary.label_conflicts:
                continue
            summary.files += 1
            summary.rollouts.add(rollout_id)
            path = Path(entry.path)
            if name.endswith(INTENTS_SUFFIX):
                await _import_intents(store, rollout_id, path, summary)
                continue
            if name.endswith(INCOMPLETE_SUFFIX):
                if await store.execute(_marker_command(rollout_id)):
                    summary.markers += 1
                continue
            for chunk in _chunks(path, progress):
                summary.lines += len(chunk)
                outcome = await store.execute(
                    _chunk_command(rollout_id, chunk),
                    size_hint=sum(len(line.raw) for line in chunk),
                )
                summary.captured += outcome.captured
                summary.damaged += outcome.damaged
                summary.already_present += outcome.already_present
                summary.conflicting_ids += outcome.conflicting_ids
    return summary
