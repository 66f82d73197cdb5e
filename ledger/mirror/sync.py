"""Making mirror files agree with the database: used by recovery, rebuild and verify."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ledger.log.queries import head_seq
from ledger.mirror.base import MirrorArea
from ledger.mirror.checkpoint import rollout_ids, rollouts_touched
from ledger.mirror.files import TEMP_SUFFIX, fsync_directory, make_agree, read_if_present

PAGE = 1000
# Rollouts a recovery rewrites from one snapshot (``catch_up_files``): a snapshot held keeps
# the WAL's checkpoints from copying what it still reads (SQLite).
RECOVERY_PAGE = 200


def area_directory(mirror_dir: Path, area: MirrorArea) -> Path:
    return mirror_dir / area.name


@asynccontextmanager
async def snapshot(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """One read transaction whose every statement sees the same state of the database.

    SQLite's read transaction is a snapshot already; PostgreSQL needs REPEATABLE READ for that.
    """
    async with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn = await conn.execution_options(isolation_level="REPEATABLE READ")
        async with conn.begin():
            yield conn


async def rewrite_rollout(
    conn: AsyncConnection, mirror_dir: Path, areas: Sequence[MirrorArea], rollout_id: str
) -> set[Path]:
    """Make every area's files of the rollout exactly what the database says."""
    changed: set[Path] = set()
    for area in areas:
        expected = await area.expected_files(conn, rollout_id)
        changed |= await asyncio.to_thread(
            make_agree,
            area_directory(mirror_dir, area),
            area.file_names(rollout_id),
            expected,
        )
    return changed


def fsync_parents(paths: set[Path]) -> None:
    for directory in {path.parent for path in paths}:
        if directory.exists():
            fsync_directory(directory)


@dataclass
class CaughtUp:
    rollouts: int  # whose files were rewritten
    head: int  # the files agree with the database at this seq


async def catch_up_files(
    engine: AsyncEngine,
    mirror_dir: Path,
    areas: Sequence[MirrorArea],
    *,
    after: int | None,
) -> CaughtUp:
    """Make the files of every rollout touched by an event after ``after`` agree with the
    database (``None``: of every rollout, and remove the files that belong to no rollout),
    without holding one snapshot for all of them.

    The head ``H0`` is read first; the rollouts are then rewritten ``RECOVERY_PAGE`` at a time,
    each page from a snapshot of its own, at or after ``H0``. A rollout not touched after ``H0``
    is the same in each of them; the ones touched since are rewritten once more, from one last
    snapshot, whose head the files then agree with. One snapshot for the whole rewrite kept
    SQLite from checkpointing the WAL for as long as the rewrite took."""
    async with snapshot(engine) as conn:
        first_head = await head_seq(conn)
    known: dict[str, set[str]] = {area.name: set() for area in areas}
    rollouts, last = 0, ""
    while True:
        async with snapshot(engine) as conn:
            if after is None:
                page = await rollout_ids(conn, start_after=last, limit=RECOVERY_PAGE)
            else:
                page = await rollouts_touched(
                    conn, after=after, upto=first_head, start_after=last, limit=RECOVERY_PAGE
                )
            changed = await _rewrite_page(conn, mirror_dir, areas, page, known)
        if not page:
            break
        await asyncio.to_thread(fsync_parents, changed)
        rollouts += len(page)
        last = page[-1]
    async with snapshot(engine) as conn:
        head = await head_seq(conn)
        last = ""
        while page := await rollouts_touched(
            conn, after=first_head, upto=head, start_after=last, limit=PAGE
        ):
            changed = await _rewrite_page(conn, mirror_dir, areas, page, known)
            await asyncio.to_thread(fsync_parents, changed)
            rollouts += len(page)
            last = page[-1]
    if after is None:
        await asyncio.to_thread(_remove_unknown, mirror_dir, areas, known)
    return CaughtUp(rollouts=rollouts, head=head)


async def _rewrite_page(
    conn: AsyncConnection,
    mirror_dir: Path,
    areas: Sequence[MirrorArea],
    page: Sequence[str],
    known: dict[str, set[str]],
) -> set[Path]:
    changed: set[Path] = set()
    for rollout_id in page:
        for area in areas:
            known[area.name].update(area.file_names(rollout_id))
        changed |= await rewrite_rollout(conn, mirror_dir, areas, rollout_id)
    return changed


def _remove_unknown(
    mirror_dir: Path, areas: Sequence[MirrorArea], known: dict[str, set[str]]
) -> list[str]:
    """Remove the files of no rollout in ``known``: what was removed."""
    removed = []
    for area in areas:
        directory = area_directory(mirror_dir, area)
        for name in sorted(_listing(directory) - known[area.name]):
            (directory / name).unlink()
            removed.append(f"{area.name}/{name}")
        if directory.exists():
            fsync_directory(directory)
    return removed


@dataclass
class MirrorComparison:
    differences: list[str] = field(default_factory=list)
    rollouts: int = 0
    head: int = 0


async def _each_rollout(conn: AsyncConnection, visit: Callable[[str], Awaitable[None]]) -> int:
    count, last = 0, ""
    while True:
        page = await rollout_ids(conn, start_after=last, limit=PAGE)
        if not page:
            return count
        for rollout_id in page:
            await visit(rollout_id)
        count += len(page)
        last = page[-1]


def _listing(directory: Path) -> set[str]:
    if not directory.is_dir():
        return set()
    with os.scandir(directory) as entries:
        return {entry.name for entry in entries if entry.is_file()}


async def compare_mirror(
    conn: AsyncConnection, mirror_dir: Path, areas: Sequence[MirrorArea]
) -> MirrorComparison:
    """Every file the database expects, byte for byte, and no other file."""
    report = MirrorComparison(head=await head_seq(conn))
    known: dict[str, set[str]] = {area.name: set() for area in areas}

    async def visit(rollout_id: str) -> None:
        for area in areas:
            directory = area_directory(mirror_dir, area)
            expected = await area.expected_files(conn, rollout_id)
            for name in area.file_names(rollout_id):
                known[area.name].add(name)
                actual = await asyncio.to_thread(read_if_present, directory / name)
                wanted = expected.get(name)
                where = f"{area.name}/{name}"
                if wanted is None and actual is not None:
                    report.differences.append(f"{where}: exists but the database has no such file")
                elif wanted is not None and actual is None:
                    report.differences.append(f"{where}: missing")
                elif wanted != actual:
                    assert wanted is not None and actual is not None
                    report.differences.append(
                        f"{where}: differs ({len(actual)} bytes on disk, {len(wanted)} expected)"
                    )

    report.rollouts = await _each_rollout(conn, visit)
    for area in areas:
        for name in sorted(_listing(area_directory(mirror_dir, area)) - known[area.name]):
            if not name.endswith(TEMP_SUFFIX):
                report.differences.append(f"{area.name}/{name}: not a file of any rollout")
    return report


async def rebuild_mirror(
    conn: AsyncConnection, mirror_dir: Path, areas: Sequence[MirrorArea]
) -> MirrorComparison:
    """Rewrite every rollout's files and remove files of no rollout; returns what it did."""
    report = MirrorComparison(head=await head_seq(conn))
    known: dict[str, set[str]] = {area.name: set() for area in areas}

    async def visit(rollout_id: str) -> None:
        for area in areas:
            known[area.name].update(area.file_names(rollout_id))
        for path in sorted(await rewrite_rollout(conn, mirror_dir, areas, rollout_id)):
            report.differences.append(f"rewrote {path.relative_to(mirror_dir)}")

    report.rollouts = await _each_rollout(conn, visit)
    removed = _remove_unknown(mirror_dir, areas, known)
    report.differences.extend(f"removed {name}" for name in removed)
    return report
