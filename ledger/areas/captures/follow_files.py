"""Reading a live capture directory: what the follower sees of one rollout's two files.

Everything here is synchronous file I/O (run on a worker thread): it opens the capture file,
checks that it is still the file the checkpoint describes (device, inode, and the hash of the
head bytes already ingested, so a new file that reuses the inode is noticed), and returns the
complete lines after the checkpoint's offset. A partial last line is left for a later read.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ledger.areas.captures.importer import CAPTURE_SUFFIX, INCOMPLETE_SUFFIX
from ledger.areas.evidence.intent_lines import INTENTS_SUFFIX, complete_lines

HEAD_BYTES = 4096
READ_BYTES = 4 * 1024 * 1024
MAX_LINES = 500
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class FileCheckpoint:
    """One followed file as the database has it (see follow_tables.py)."""

    file_name: str
    rollout_id: str
    kind: str
    identity: str
    head_sha256: str
    head_length: int
    byte_offset: int
    lines: int
    serial: str


@dataclass(frozen=True)
class TailLine:
    offset: int  # of the line's first byte
    raw: bytes  # without the newline


@dataclass
class RolloutRead:
    """One look at a rollout's files, against its checkpoints."""

    capture_identity: str | None = None
    capture_size: int = 0
    # The checkpointed capture file or marker is gone, or another file now has its name.
    replaced: bool = False
    lines: list[TailLine] = field(default_factory=list)
    start: int = 0
    end: int = 0  # offset after the last complete line read
    blank_lines: int = 0
    head_sha256: str = EMPTY_SHA256
    head_length: int = 0
    marker_identity: str | None = None


def capture_name(rollout_id: str) -> str:
    return rollout_id + CAPTURE_SUFFIX


def marker_name(rollout_id: str) -> str:
    return rollout_id + INCOMPLETE_SUFFIX


def intents_name(rollout_id: str) -> str:
    return rollout_id + INTENTS_SUFFIX


def rollout_of(file_name: str) -> str | None:
    """The rollout of a followed file: a capture file, a marker or Gym's intents file (its
    other token-store files, ``.tokens.jsonl``, ``.tokens.lock``, ... are not followed)."""
    for suffix in (CAPTURE_SUFFIX, INCOMPLETE_SUFFIX, INTENTS_SUFFIX):
        if file_name.endswith(suffix) and len(file_name) > len(suffix):
            return file_name[: -len(suffix)]
    return None


def identity_of(stat: os.stat_result) -> str:
    return f"{stat.st_dev}:{stat.st_ino}"


def head_sha256(fd: int, length: int) -> str | None:
    """SHA-256 of the first ``length`` bytes, or None when the file is shorter."""
    data = os.pread(fd, length, 0) if length else b""
    if len(data) < length:
        return None
    return hashlib.sha256(data).hexdigest()


def _complete_lines(fd: int, start: int, read: RolloutRead) -> None:
    """Complete lines from ``start`` (at most MAX_LINES, about READ_BYTES; a longer single line
    is read whole). ``read.end`` stays at ``start`` when no line is complete yet."""
    data = os.pread(fd, READ_BYTES, start)
    while data and b"\n" not in data:
        more = os.pread(fd, READ_BYTES, start + len(data))
        if not more:
            return  # a partial line: wait until its newline arrives
        data += more
    at = 0
    while len(read.lines) < MAX_LINES:
        newline = data.find(b"\n", at)
        if newline < 0:
            break
        raw = data[at:newline]
        if raw.strip():
            read.lines.append(TailLine(start + at, raw))
        else:
            read.blank_lines += 1
        at = newline + 1
    read.end = start + at


def read_rollout(
    directory: Path,
    rollout_id: str,
    capture: FileCheckpoint | None,
    marker: FileCheckpoint | None,
) -> RolloutRead:
    read = RolloutRead()
    try:
        marker_stat = os.stat(directory / marker_name(rollout_id))
    except FileNotFoundError:
        marker_stat = None
    read.marker_identity = identity_of(marker_stat) if marker_stat is not None else None
    if marker is not None and read.marker_identity != marker.identity:
        read.replaced = True
    try:
        fd = os.open(directory / capture_name(rollout_id), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        read.replaced = read.replaced or capture is not None
        return read
    try:
        stat = os.fstat(fd)
        read.capture_identity = identity_of(stat)
        read.capture_size = stat.st_size
        if capture is not None and (
            capture.identity != read.capture_identity
            or stat.st_size < capture.byte_offset
            or head_sha256(fd, capture.head_length) != capture.head_sha256
        ):
            read.replaced = True
        if read.replaced:
            return read
        read.start = read.end = capture.byte_offset if capture is not None else 0
        read.head_length = capture.head_length if capture is not None else 0
        read.head_sha256 = capture.head_sha256 if capture is not None else EMPTY_SHA256
        _complete_lines(fd, read.start, read)
        head_length = min(HEAD_BYTES, read.end)
        if head_length > read.head_length:
            digest = head_sha256(fd, head_length)
            assert digest is not None  # the bytes before ``end`` were just read
            read.head_sha256, read.head_length = digest, head_length
        return read
    finally:
        os.close(fd)


@dataclass
class IntentsRead:
    """One look at a rollout's intents file, from its checkpoint (None: from the start)."""

    identity: str | None = None  # None: no file
    size: int = 0
    start: int = 0
    end: int = 0
    lines: list[bytes] = field(default_factory=list)


def read_intents(
    directory: Path, rollout_id: str, checkpoint: FileCheckpoint | None
) -> IntentsRead:
    """Complete lines after the checkpoint. A file that is not the checkpoint's (Gym removes
    it when it drops or deletes a rollout, and a new one may follow) is read from its start:
    intents are recorded once per call, so reading a line again records nothing."""
    read = IntentsRead()
    try:
        fd = os.open(directory / intents_name(rollout_id), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return read
    try:
        stat = os.fstat(fd)
        read.identity, read.size = identity_of(stat), stat.st_size
        if (
            checkpoint is not None
            and checkpoint.identity == read.identity
            and checkpoint.byte_offset <= read.size
        ):
            read.start = checkpoint.byte_offset
        read.end = read.start
        data = os.pread(fd, READ_BYTES, read.start)
        read.lines, taken = complete_lines(data)
        read.end = read.start + taken
        return read
    finally:
        os.close(fd)
