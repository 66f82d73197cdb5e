"""The capture-directory follower's checkpoints. Not a projection: written by the follower only,
in the same transaction as the events each advance covers (so a crash loses or repeats nothing).

One row per followed file (``<id>.capture.jsonl`` or ``<id>.capture.incomplete``) of a
directory. ``identity`` is ``<st_dev>:<st_ino>`` and ``head_sha256`` the SHA-256 of the file's
first ``head_length`` bytes (at most 4 KiB of what was ingested): together they tell the file
ingested so far from a new file that reuses its inode (Gym's pre-dispatch clear removes the file
and a later call creates it again). ``serial`` is random per row; the idempotency key of each
line's event is derived from it and the line's byte offset.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Index, String, Table

from ledger.log.metadata import metadata

capture_follow_files = Table(
    "capture_follow_files",
    metadata,
    Column("directory", String(1024), primary_key=True),
    Column("file_name", String(300), primary_key=True),
    Column("rollout_id", String(200), nullable=False),
    # "capture" (a .capture.jsonl being tailed) or "marker" (a .capture.incomplete seen).
    Column("kind", String(16), nullable=False),
    Column("identity", String(64), nullable=False),
    Column("head_sha256", String(64), nullable=False),
    Column("head_length", BigInteger, nullable=False),
    # Every byte before this offset is ingested; it always sits just after a newline.
    Column("byte_offset", BigInteger, nullable=False),
    # Non-blank lines ingested (positions consumed, as Gym's tolerant read counts them).
    Column("lines", BigInteger, nullable=False),
    Column("serial", String(32), nullable=False),
    Column("updated_at", Float, nullable=False),
)
Index(
    "ix_capture_follow_files_rollout",
    capture_follow_files.c.directory,
    capture_follow_files.c.rollout_id,
)

__all__ = ["capture_follow_files"]
