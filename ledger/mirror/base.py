"""The contract between the mirror follower and the areas that own files in the mirror.

Each area (model-call captures, lineage ledgers) owns one subdirectory of the mirror directory
and the files of each rollout in it. The follower feeds it events in seq order, a page at a
time (``apply``); for
crash recovery, rebuild and verification it asks the area what a rollout's files must contain
according to the database (``expected_files``) and makes the directory agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.records import StoredEvent
from ledger.mirror.files import PageFiles


class MirrorArea(Protocol):
    name: str
    """Subdirectory under the mirror directory, e.g. ``model-calls`` or ``lineage``."""

    def handles(self, kind: str) -> bool:
        """Whether events of this kind change this area's files."""
        ...

    def file_names(self, rollout_id: str) -> list[str]:
        """Every file name this area may keep for the rollout (e.g. ``r1.capture.jsonl``)."""
        ...

    def apply(self, directory: Path, event: StoredEvent, files: PageFiles) -> None:
        """Apply one event to the files in ``directory`` through ``files`` (the changes of the
        current page: appends are written, flushed and fsynced once per file when the page
        ends; the follower then fsyncs the directories and advances its checkpoint).

        ``directory`` is ``<mirror-dir>/<name>`` (it may not exist yet).
        """
        ...

    async def expected_files(self, conn: AsyncConnection, rollout_id: str) -> dict[str, bytes]:
        """The exact content of every file that must exist for the rollout, from the database.

        Names from ``file_names`` that are missing here must not exist in the mirror.
        """
        ...
