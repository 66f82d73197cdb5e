"""Files and directories that hold the ledger's data are private to their owner: every prompt
and response is in them (0700 directories, 0600 files, like the control token)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path) -> None:
    """``mkdir -p`` whose new directories are 0700 (an existing one is left as it is)."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue
        # mkdir's mode passes through the umask; a restrictive one is fine, a loose one is not.
        os.chmod(directory, PRIVATE_DIR_MODE)


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists. SQLite then opens it as a new
    database and gives its -wal and -shm files the same mode."""
    make_private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def publish_private_file(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` (0600) unless a file is there already: True when this call
    wrote it. The file appears whole or not at all (written and synced under a temporary name,
    then linked to ``path``, which fails when another process got there first), so a process
    that finds it, such as the other worker of ``serve --workers 2`` starting at the same
    moment, never reads it half written."""
    make_private_dir(path.parent)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        return True
    finally:
        os.unlink(temporary)
