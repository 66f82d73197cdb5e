"""The follower's writer commands: each advances a file's checkpoint in the same transaction
as the events it covers, and only from the checkpoint the follower read (compare-and-set), so a
crash, a restart or a second follower on the same directory neither loses nor repeats a line.

A command returns None when the checkpoint in the database is not the one expected (another
follower moved it); the follower then reloads its checkpoints and looks again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select, update

from ledger.areas.captures.events import (
    CAPTURE_CLEARED,
    CAPTURE_MARKED_INCOMPLETE,
    CaptureCleared,
    CaptureMarkedIncomplete,
)
from ledger.areas.captures.follow_files import FileCheckpoint, TailLine
from ledger.areas.captures.follow_tables import capture_follow_files as files
from ledger.areas.captures.importer import CaptureLine, LineOutcome, import_line
from ledger.areas.captures.queries import load_state
from ledger.areas.evidence.intent_lines import parse_intent_lines
from ledger.areas.evidence.service import record_intents_in
from ledger.log.transaction import WriteTransaction


def line_key(serial: str, offset: int) -> str:
    """The event's idempotency key: one per (followed file, byte offset)."""
    return "capture-follow:" + hashlib.sha256(f"{serial}\0{offset}".encode()).hexdigest()


def _row_to_checkpoint(row: object) -> FileCheckpoint:
    return FileCheckpoint(
        file_name=row.file_name,  # type: ignore[attr-defined]
        rollout_id=row.rollout_id,  # type: ignore[attr-defined]
        kind=row.kind,  # type: ignore[attr-defined]
        identity=row.identity,  # type: ignore[attr-defined]
        head_sha256=row.head_sha256,  # type: ignore[attr-defined]
        head_length=int(row.head_length),  # type: ignore[attr-defined]
        byte_offset=int(row.byte_offset),  # type: ignore[attr-defined]
        lines=int(row.lines),  # type: ignore[attr-defined]
        serial=row.serial,  # type: ignore[attr-defined]
    )


# The kinds of followed file; a clear concerns the first two only (intents are facts about
# admitted calls, which a pre-dispatch clear of the capture file does not undo).
CAPTURE_KINDS = ("capture", "marker")
INTENTS_KIND = "intents"


def load_checkpoints(
    conn: Connection, directory: str, rollout_id: str | None = None, *, kinds: Sequence[str] = ()
) -> dict[str, FileCheckpoint]:
    query = select(files).where(files.c.directory == directory)
    if rollout_id is not None:
        query = query.where(files.c.rollout_id == rollout_id)
    if kinds:
        query = query.where(files.c.kind.in_(kinds))
    return {row.file_name: _row_to_checkpoint(row) for row in conn.execute(query)}


def _current(tx: WriteTransaction, directory: str, file_name: str) -> FileCheckpoint | None:
    row = tx.conn.execute(
        select(files).where(files.c.directory == directory, files.c.file_name == file_name)
    ).first()
    return _row_to_checkpoint(row) if row is not None else None


def _same(a: FileCheckpoint | None, b: FileCheckpoint | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.serial, a.byte_offset) == (b.serial, b.byte_offset)


def _store(
    tx: WriteTransaction, directory: str, expected: FileCheckpoint | None, new: FileCheckpoint
) -> None:
    values = {
        "rollout_id": new.rollout_id,
        "kind": new.kind,
        "identity": new.identity,
        "head_sha256": new.head_sha256,
        "head_length": new.head_length,
        "byte_offset": new.byte_offset,
        "lines": new.lines,
        "serial": new.serial,
        "updated_at": time.time(),
    }
    if expected is None:
        tx.conn.execute(
            insert(files).values(directory=directory, file_name=new.file_name, **values)
        )
    else:
        tx.conn.execute(
            update(files)
            .where(files.c.directory == directory, files.c.file_name == new.file_name)
            .values(**values)
        )


@dataclass
class IngestOutcome(LineOutcome):
    lines: int = 0


def ingest_command(
    directory: str,
    expected: FileCheckpoint | None,
    new: FileCheckpoint,
    lines: Sequence[TailLine],
) -> Callable[[WriteTransaction], IngestOutcome | None]:
    """The lines between ``expected`` (None: a file not followed yet) and ``new`` as events."""

    def command(tx: WriteTransaction) -> IngestOutcome | None:
        if not _same(_current(tx, directory, new.file_name), expected):
            return None
        outcome = IngestOutcome(lines=len(lines))
        position = expected.lines if expected is not None else 0
        for n, line in enumerate(lines):
            import_line(
                tx,
                new.rollout_id,
                CaptureLine(position + n, line.raw),
                outcome,
                key=line_key(new.serial, line.offset),
            )
        _store(tx, directory, expected, new)
        return outcome

    return command


def marker_command(
    directory: str, new: FileCheckpoint
) -> Callable[[WriteTransaction], bool | None]:
    """A newly seen ``.capture.incomplete`` marker: the rollout is marked incomplete (no event
    when it already is). True when an event was appended."""

    def command(tx: WriteTransaction) -> bool | None:
        if _current(tx, directory, new.file_name) is not None:
            return None
        rollout_id = new.rollout_id
        changed = not load_state(tx.conn, rollout_id, tx.generation_of(rollout_id)).incomplete
        if changed:
            tx.append(
                CAPTURE_MARKED_INCOMPLETE,
                CaptureMarkedIncomplete(reason="capture.incomplete marker in the followed dir"),
                rollout_id=rollout_id,
            )
        _store(tx, directory, None, new)
        return changed

    return command


def clear_command(
    directory: str, rollout_id: str, expected: Sequence[FileCheckpoint]
) -> Callable[[WriteTransaction], bool | None]:
    """Gym's pre-dispatch clear as the follower sees it (a followed file of the rollout is gone
    or replaced): the rollout's captures are cleared and its checkpoints forgotten, so the files
    now present are read from their start. True when a clear event was appended."""

    def command(tx: WriteTransaction) -> bool | None:
        stored = load_checkpoints(tx.conn, directory, rollout_id, kinds=CAPTURE_KINDS)
        if set(stored) != {c.file_name for c in expected} or not all(
            _same(stored[c.file_name], c) for c in expected
        ):
            return None
        state = load_state(tx.conn, rollout_id, tx.generation_of(rollout_id))
        changed = bool(state.has_evidence or state.next_call_index or state.pending_count)
        if changed:
            tx.append(CAPTURE_CLEARED, CaptureCleared(), rollout_id=rollout_id)
        tx.conn.execute(
            delete(files).where(
                files.c.directory == directory,
                files.c.rollout_id == rollout_id,
                files.c.kind.in_(CAPTURE_KINDS),
            )
        )
        return changed

    return command


@dataclass
class IntentsOutcome:
    recorded: int = 0
    unreadable: int = 0


def intents_command(
    directory: str,
    rollout_id: str,
    file_name: str,
    expected: FileCheckpoint | None,
    new: FileCheckpoint | None,
    lines: Sequence[bytes],
) -> Callable[[WriteTransaction], IntentsOutcome | None]:
    """The intents on ``lines`` recorded (once per call id) with the intents file's checkpoint
    moved from ``expected`` to ``new`` (None: the file is gone, its checkpoint forgotten)."""

    def command(tx: WriteTransaction) -> IntentsOutcome | None:
        if not _same(_current(tx, directory, file_name), expected):
            return None
        parsed = parse_intent_lines(list(lines))
        receipt = record_intents_in(tx, rollout_id=rollout_id, model_call_ids=parsed.ids)
        if new is None:
            tx.conn.execute(
                delete(files).where(files.c.directory == directory, files.c.file_name == file_name)
            )
        else:
            _store(tx, directory, expected, new)
        return IntentsOutcome(len(receipt.recorded), parsed.unreadable)

    return command
