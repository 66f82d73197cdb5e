"""The captures files of the mirror: Gym's CaptureStore layout under ``<mirror-dir>/model-calls/``.

``<id>.capture.jsonl`` holds one raw exchange per line in call order (a damaged imported line is
written back as it was read, so Gym's tolerant read counts it again); ``<id>.capture.incomplete``
is the empty marker. A clear, and the end of a generation, remove both files.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.captures.events import (
    CAPTURE_CLEARED,
    CAPTURE_MARKED_INCOMPLETE,
    MODEL_CALL_CAPTURED,
    MODEL_CALL_DAMAGED,
)
from ledger.areas.captures.queries import PositionEvent, read_positions
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log.errors import LogDamaged
from ledger.log.records import StoredEvent
from ledger.log.rollout_events import ROLLOUT_DELETED
from ledger.mirror.base import MirrorArea
from ledger.mirror.files import PageFiles

CAPTURE_SUFFIX = ".capture.jsonl"
INCOMPLETE_SUFFIX = ".capture.incomplete"

_HANDLED = frozenset(
    {
        MODEL_CALL_CAPTURED,
        MODEL_CALL_DAMAGED,
        CAPTURE_MARKED_INCOMPLETE,
        CAPTURE_CLEARED,
        ROLLOUT_DELETED,
    }
)


def capture_line(kind: str, payload: dict[str, object]) -> bytes:
    """The mirror line of one position, newline included."""
    if kind == MODEL_CALL_DAMAGED:
        text = str(payload["raw_line"])
    else:
        exchange = payload["exchange"]
        assert isinstance(exchange, dict)
        text = serialize_capture_line(exchange)
    return (text + "\n").encode()


class CaptureMirror:
    name = "model-calls"

    def handles(self, kind: str) -> bool:
        return kind in _HANDLED

    def file_names(self, rollout_id: str) -> list[str]:
        return [rollout_id + CAPTURE_SUFFIX, rollout_id + INCOMPLETE_SUFFIX]

    def apply(self, directory: Path, event: StoredEvent, files: PageFiles) -> None:
        rollout_id = event.rollout_id
        if rollout_id is None:
            return
        capture, marker = (directory / name for name in self.file_names(rollout_id))
        if event.kind in (MODEL_CALL_CAPTURED, MODEL_CALL_DAMAGED):
            if event.payload is None:  # redacted: its generation has ended, files go with it
                return
            files.append(capture, capture_line(event.kind, event.payload))
        elif event.kind == CAPTURE_MARKED_INCOMPLETE:
            files.append(marker, b"")
        else:  # A clear, or the tombstone ending the generation: the id reads as unused.
            files.remove(capture)
            files.remove(marker)

    async def expected_files(self, conn: AsyncConnection, rollout_id: str) -> dict[str, bytes]:
        state, positions = await read_positions(conn, rollout_id)
        capture_name, marker_name = self.file_names(rollout_id)
        files: dict[str, bytes] = {}
        lines = [_line_of(position) for position in positions]
        if lines:
            files[capture_name] = b"".join(lines)
        if state.incomplete:
            files[marker_name] = b""
        return files


def _line_of(position: PositionEvent) -> bytes:
    if position.kind is None:  # the projection points at a seq the log no longer has
        raise LogDamaged(f"the event at seq {position.seq} (a capture) is missing from the log")
    if position.payload is None:
        raise LogDamaged(
            f"the capture at seq {position.seq} has no payload, but its generation is live "
            "(compaction redacts ended generations only)"
        )
    return capture_line(position.kind, position.payload)


def areas() -> list[MirrorArea]:
    return [CaptureMirror()]
