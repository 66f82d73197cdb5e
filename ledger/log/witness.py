"""A witness file: the append-only list of signed checkpoints kept outside the database.

One checkpoint a line (``checkpoints.jsonl``), appended with ``O_APPEND`` and fsynced, so several
server processes on one data dir may publish to the same file (a line is one ``write`` far below
the size the kernel keeps whole). A crash mid-append leaves at most a last line without its
newline, which readers skip: it was never acknowledged as published.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from ledger.log.checkpoints import (
    Checkpoint,
    MalformedCheckpoint,
    checkpoint_from_dict,
    parse_checkpoint,
)
from ledger.log.private_files import PRIVATE_FILE_MODE, make_private_dir

WITNESS_FILE = "checkpoints.jsonl"
# Lines longer than this are not checkpoints (a checkpoint is a few hundred bytes).
_MAX_LINE = 4096
_BLOCK = 64 * 1024


@dataclass(frozen=True)
class WitnessedCheckpoint:
    checkpoint: Checkpoint
    source: str  # "<file>:<line>", for the FAIL lines that name it


@dataclass
class WitnessReading:
    checkpoints: list[WitnessedCheckpoint] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def append_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    make_private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        os.write(fd, checkpoint.to_line())
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse(line: bytes, source: str, reading: WitnessReading) -> None:
    if len(line) > _MAX_LINE:
        reading.problems.append(f"{source}: a line of {len(line)} bytes is not a checkpoint")
        return
    try:
        reading.checkpoints.append(WitnessedCheckpoint(parse_checkpoint(line), source))
    except MalformedCheckpoint as exc:
        reading.problems.append(f"{source}: not a checkpoint: {exc}")


def read_witness(path: Path) -> WitnessReading:
    """Every checkpoint of the file in order, and a problem per line that is not one (the torn
    last line of a crash is skipped silently). A missing file reads as empty."""
    reading = WitnessReading()
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return reading
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith(b"\n"):
                break  # torn by a crash while it was appended
            if line.strip():
                _parse(line, f"{path}:{number}", reading)
    return reading


def _complete_end(handle: BinaryIO) -> int:
    """The offset just past the file's last newline (what follows it is a torn line)."""
    position = handle.seek(0, os.SEEK_END)
    while position > 0:
        size = min(_BLOCK, position)
        position -= size
        handle.seek(position)
        newline = handle.read(size).rfind(b"\n")
        if newline >= 0:
            return position + newline + 1
    return 0


def _lines_backwards(path: Path) -> Iterator[bytes]:
    """The complete lines of ``path``, last first (a torn last line is skipped)."""
    with path.open("rb") as handle:
        position = _complete_end(handle)
        tail = b""
        while position > 0:
            size = min(_BLOCK, position)
            position -= size
            handle.seek(position)
            lines = (handle.read(size) + tail).split(b"\n")
            tail = lines.pop(0)  # the start of a line that may begin in the block before
            yield from reversed(lines)
        if tail:
            yield tail


def earliest_covering(path: Path, seq: int, key_id: str) -> Checkpoint | None:
    """The first checkpoint of the file at or after ``seq`` signed by the key ``key_id``, read
    from the end (recent events are proved by recent checkpoints, so the read stops soon); None
    when none reaches it."""
    found: Checkpoint | None = None
    try:
        for line in _lines_backwards(path):
            if not line.strip() or len(line) > _MAX_LINE:
                continue
            try:
                checkpoint = parse_checkpoint(line)
            except MalformedCheckpoint:
                continue
            if checkpoint.seq < seq:
                break
            if checkpoint.key_id == key_id:
                found = checkpoint
    except FileNotFoundError:
        return None
    return found


def set_aside(path: Path) -> Path | None:
    """Move a witness file out of the way (``ledger restore`` rewinds the log on purpose):
    renamed with the time, kept for the operator. Returns the new path, if there was a file."""
    if not path.exists():
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.stem}.before-restore-{stamp}{path.suffix}")
    path.rename(target)
    return target


def latest_in(path: Path) -> Checkpoint | None:
    """The file's last checkpoint (None for a missing or empty file)."""
    try:
        for line in _lines_backwards(path):
            if line.strip() and len(line) <= _MAX_LINE:
                try:
                    return parse_checkpoint(line)
                except MalformedCheckpoint:
                    continue
    except FileNotFoundError:
        return None
    return None


def read_checkpoint_file(path: Path) -> WitnessReading:
    """A witness file, or one checkpoint kept as JSON: the body of ``GET
    /v1/checkpoints/latest`` (its ``checkpoint``) or the checkpoint alone. A public key in
    such a copy is not trusted: checkpoints are checked with the key the verifier is given."""
    try:
        small = path.stat().st_size <= _BLOCK
    except FileNotFoundError:
        return WitnessReading()
    if small:
        try:
            value = json.loads(path.read_bytes())
        except ValueError:
            value = None
        if isinstance(value, dict):
            reading = WitnessReading()
            try:
                checkpoint = checkpoint_from_dict(value.get("checkpoint", value))
            except MalformedCheckpoint as exc:
                reading.problems.append(f"{path}: not a checkpoint: {exc}")
            else:
                reading.checkpoints.append(WitnessedCheckpoint(checkpoint, str(path)))
            return reading
    return read_witness(path)
