"""What tells the follower that a capture directory changed: inotify where the kernel offers it,
else polling (network filesystems such as NFS deliver no inotify events for other clients'
writes, so a setting forces polling there).

A watcher's ``changes(timeout)`` returns the names that changed, or None for "rescan the whole
directory" (polling, an inotify queue overflow, or the directory itself went away).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import os
import struct
import sys
from pathlib import Path
from typing import Protocol

# <sys/inotify.h>
IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000
WATCH_MASK = (
    IN_MODIFY
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
RESCAN_MASK = IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF
log = logging.getLogger(__name__)

_EVENT_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len


class Watcher(Protocol):
    mode: str

    async def changes(self, wait_at_most: float) -> set[str] | None: ...

    def close(self) -> None: ...


class PollingWatcher:
    """Every ``interval`` seconds: rescan (the follower compares sizes and identities)."""

    mode = "polling"

    def __init__(self, interval: float) -> None:
        self.interval = interval

    async def changes(self, wait_at_most: float) -> set[str] | None:
        await asyncio.sleep(min(self.interval, wait_at_most))  # poll: the polling interval itself
        return None

    def close(self) -> None:
        return None


def parse_events(data: bytes) -> tuple[set[str], bool]:
    """(names in the events, whether any event asks for a full rescan)."""
    names: set[str] = set()
    rescan = False
    at = 0
    while at + _EVENT_HEADER.size <= len(data):
        _wd, mask, _cookie, length = _EVENT_HEADER.unpack_from(data, at)
        at += _EVENT_HEADER.size
        raw = data[at : at + length].split(b"\0", 1)[0]
        at += length
        if mask & RESCAN_MASK:
            rescan = True
        if raw:
            names.add(os.fsdecode(raw))
    return names, rescan


class InotifyWatcher:
    """Linux inotify on one directory, through libc (``inotify_init1``/``inotify_add_watch``)."""

    mode = "inotify"

    def __init__(self, directory: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"inotify_init1: {os.strerror(code)}")
        watch = libc.inotify_add_watch(fd, os.fsencode(directory), WATCH_MASK)
        if watch < 0:
            code = ctypes.get_errno()
            os.close(fd)
            raise OSError(code, f"inotify_add_watch {directory}: {os.strerror(code)}")
        self.fd: int = fd
        self._ready = asyncio.Event()
        asyncio.get_running_loop().add_reader(fd, self._ready.set)

    def _drain(self) -> tuple[set[str], bool]:
        names: set[str] = set()
        rescan = False
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            if not data:
                break
            found, overflow = parse_events(data)
            names |= found
            rescan = rescan or overflow
        return names, rescan

    async def changes(self, wait_at_most: float) -> set[str] | None:
        if not self._ready.is_set():
            try:
                await asyncio.wait_for(self._ready.wait(), wait_at_most)
            except TimeoutError:
                return set()
        self._ready.clear()
        names, rescan = self._drain()
        return None if rescan else names

    def close(self) -> None:
        # A RuntimeError: the loop is already gone, and with it the reader.
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().remove_reader(self.fd)
        os.close(self.fd)


def inotify_available() -> bool:
    return sys.platform.startswith("linux")


def open_watcher(directory: Path, *, force_polling: bool, poll_interval: float) -> Watcher:
    """inotify unless polling is forced or the kernel refuses (then polling, never an error)."""
    if not force_polling and inotify_available():
        try:
            return InotifyWatcher(directory)
        except OSError as exc:
            log.warning("inotify unavailable for %s (%s); polling instead", directory, exc)
    return PollingWatcher(poll_interval)
