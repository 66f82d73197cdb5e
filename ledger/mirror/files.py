"""Durable file operations for the mirror: appends and replacements survive a crash."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ledger.log.private_files import PRIVATE_FILE_MODE, make_private_dir

TEMP_SUFFIX = ".mirror-tmp"


def fsync_directory(directory: Path) -> None:
    """Make created, renamed or removed entries of ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_durably(path: Path, data: bytes) -> None:
    """Append, flush and fsync (Gym's CaptureStore discipline, without the lock: one writer)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(path: Path, data: bytes) -> None:
    """Write a whole file atomically: a reader sees the old or the new content, never half."""
    temporary = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


class PageFiles:
    """The file changes of one page of events, with one append (one fsync) per file.

    Appends are gathered per file in event order and written by ``finish``; a removal or a
    replacement happens at once and drops the appends gathered for that file before it (they
    would be removed or overwritten anyway), so the files end as applying the events one by one
    would leave them. A crash part way is repaired like any other: the follower's checkpoint
    only advances after ``finish``, and recovery rewrites every rollout touched after it.
    """

    def __init__(self) -> None:
        self._appends: dict[Path, list[bytes]] = {}
        self._changed: set[Path] = set()

    def append(self, path: Path, data: bytes) -> None:
        self._appends.setdefault(path, []).append(data)

    def replace(self, path: Path, data: bytes) -> None:
        self._appends.pop(path, None)
        make_private_dir(path.parent)
        replace_durably(path, data)
        self._changed.add(path)

    def remove(self, path: Path) -> None:
        self._appends.pop(path, None)
        if remove_if_present(path):
            self._changed.add(path)

    def finish(self) -> set[Path]:
        """Write the gathered appends (each file flushed and fsynced); every path changed."""
        for path, chunks in self._appends.items():
            make_private_dir(path.parent)
            append_durably(path, b"".join(chunks))
            self._changed.add(path)
        self._appends = {}
        return self._changed


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def remove_if_present(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def read_if_present(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def make_agree(directory: Path, names: Iterable[str], expected: Mapping[str, bytes]) -> set[Path]:
    """Make the files ``names`` in ``directory`` exactly ``expected`` (absent when not listed).

    Returns the paths that had to change; the caller fsyncs the directory if any did.
    """
    changed: set[Path] = set()
    for name in names:
        path = directory / name
        content = expected.get(name)
        current = read_if_present(path)
        if content is None:
            if current is not None and remove_if_present(path):
                changed.add(path)
        elif current != content:
            make_private_dir(directory)
            replace_durably(path, content)
            changed.add(path)
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            (directory / (name + TEMP_SUFFIX)).unlink()
    return changed
