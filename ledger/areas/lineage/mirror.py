"""The lineage files of the mirror: Gym's ``FileLineageStore`` layout under ``lineage/``.

``<id>.lineage.jsonl`` holds the rows of the current generation, one compact JSON object with
sorted keys per line; ``<id>.lineage.retired`` is the empty fence file. Retire writes the fence
and removes the ledger (as Gym's two phases do); delete removes both. Discarded late rows never
reach the files, exactly as Gym discards them.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.lineage.events import FAILURE_RECORDED, ROW_RECORDED
from ledger.areas.lineage.queries import ledger_view
from ledger.log.records import StoredEvent
from ledger.log.rollout_events import ROLLOUT_DELETED, ROLLOUT_RETIRED
from ledger.mirror.base import MirrorArea
from ledger.mirror.files import PageFiles

LEDGER_SUFFIX = ".lineage.jsonl"
FENCE_SUFFIX = ".lineage.retired"


def ledger_line(row: dict[str, object]) -> bytes:
    """One ledger line exactly as Gym appends it: compact JSON, sorted keys, newline.

    Gym keeps json's default ``ensure_ascii``, so a non-ASCII string is written as ``\\uXXXX``;
    doing the same keeps the mirror byte-identical to Gym's own file.
    """
    return (json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n").encode()


class LineageMirrorArea:
    name = "lineage"
    _KINDS = frozenset({ROW_RECORDED, FAILURE_RECORDED, ROLLOUT_RETIRED, ROLLOUT_DELETED})

    def handles(self, kind: str) -> bool:
        return kind in self._KINDS

    def file_names(self, rollout_id: str) -> list[str]:
        return [f"{rollout_id}{LEDGER_SUFFIX}", f"{rollout_id}{FENCE_SUFFIX}"]

    def apply(self, directory: Path, event: StoredEvent, files: PageFiles) -> None:
        if event.rollout_id is None or not self.handles(event.kind):
            return
        ledger = directory / f"{event.rollout_id}{LEDGER_SUFFIX}"
        fence = directory / f"{event.rollout_id}{FENCE_SUFFIX}"
        if event.kind in (ROW_RECORDED, FAILURE_RECORDED):
            if event.payload is None:
                return  # redacted: an ended generation, whose files a delete removed
            row = event.payload["row"] if event.kind == ROW_RECORDED else event.payload
            files.append(ledger, ledger_line(row))
        elif event.kind == ROLLOUT_RETIRED:
            # Fence first, then remove the ledger: a crash in between leaves a fenced rollout.
            files.replace(fence, b"")
            files.remove(ledger)
        else:  # ROLLOUT_DELETED
            files.remove(ledger)
            files.remove(fence)

    async def expected_files(self, conn: AsyncConnection, rollout_id: str) -> dict[str, bytes]:
        view = await ledger_view(conn, rollout_id)
        if view.retired:
            return {f"{rollout_id}{FENCE_SUFFIX}": b""}
        if not view.rows:
            return {}
        return {f"{rollout_id}{LEDGER_SUFFIX}": b"".join(ledger_line(row) for row in view.rows)}


def areas() -> list[MirrorArea]:
    return [LineageMirrorArea()]
