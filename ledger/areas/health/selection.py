"""Which rollouts a run-level answer covers: an id glob, a window on the time of their last
event, a task, a run label; and of several attempts (``<id>-a<n>``) of one (task, rollout),
the latest."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ledger.areas.runs.labels import check_run_label
from ledger.gym.ids import split_transport_rollout_id
from ledger.log.errors import BadRequest, InvalidPayload

Attempts = Literal["latest", "all"]
MAX_GLOB_LENGTH = 400
# Rollout-id characters, plus the two wildcards.
GLOB_PATTERN = r"^[A-Za-z0-9._*?-]+$"
_GLOB = re.compile(GLOB_PATTERN)


def glob_to_like(glob: str) -> str:
    """``*`` and ``?`` as SQL LIKE's ``%`` and ``_``; LIKE's own wildcards escaped with ``\\``."""
    if len(glob) > MAX_GLOB_LENGTH:
        raise BadRequest(f"ids: a glob of at most {MAX_GLOB_LENGTH} characters; got {len(glob)}")
    if _GLOB.fullmatch(glob) is None:
        raise BadRequest(
            "ids: a glob of rollout-id characters (letters, digits, '.', '-', '_') "
            f"and the wildcards '*' and '?'; got {glob!r}"
        )
    escaped = glob.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def literal_prefix(glob: str) -> str:
    """The characters before the glob's first wildcard: a key range the index can seek."""
    cut = min((i for i, ch in enumerate(glob) if ch in "*?"), default=len(glob))
    return glob[:cut]


def _utc(moment: datetime | None, name: str) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise BadRequest(f"{name}: give a time zone (e.g. 2026-01-01T00:00:00Z); got {moment}")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+00:01 is before year 1 in UTC
        raise BadRequest(f"{name}: {moment.isoformat()} is out of range in UTC") from None


@dataclass(frozen=True)
class Selection:
    ids: str | None = None  # glob
    since: datetime | None = None  # last event at or after
    until: datetime | None = None  # last event before
    task_id: str | None = None
    attempts: Attempts = "latest"
    run: str | None = None  # run label

    def __post_init__(self) -> None:
        if self.ids is not None:
            glob_to_like(self.ids)
        if self.run is not None:
            try:
                check_run_label(self.run)
            except InvalidPayload as exc:  # a selection's bad input is a 400, like the glob's
                raise BadRequest(exc.message) from None
        object.__setattr__(self, "since", _utc(self.since, "since"))
        object.__setattr__(self, "until", _utc(self.until, "until"))
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise BadRequest(f"since ({self.since}) must be before until ({self.until})")
        if self.attempts not in ("latest", "all"):
            raise BadRequest(f"attempts: 'latest' or 'all'; got {self.attempts!r}")

    def matches(self, rollout_id: str) -> bool:
        """The glob, case-sensitive (SQLite's LIKE, which preselects, ignores case)."""
        return self.ids is None or fnmatch.fnmatchcase(rollout_id, self.ids)

    def describe(self) -> dict[str, object]:
        return {
            "ids": self.ids,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "task_id": self.task_id,
            "run": self.run,
            "attempts": self.attempts,
        }


def superseded_attempts(rollout_ids: Iterable[str]) -> set[str]:
    """The ids that a later attempt of the same (task, rollout) supersedes."""
    latest: dict[str, tuple[int, str]] = {}
    superseded: set[str] = set()
    for rollout_id in rollout_ids:
        logical, attempt = split_transport_rollout_id(rollout_id)
        assert logical is not None
        held = latest.get(logical)
        if held is None:
            latest[logical] = (attempt, rollout_id)
        elif attempt > held[0]:
            superseded.add(held[1])
            latest[logical] = (attempt, rollout_id)
        else:
            superseded.add(rollout_id)
    return superseded
