"""Online backup and restore of the whole database (docs/operations.md gives the drill).

SQLite: ``VACUUM INTO`` from a read-only connection. It reads one snapshot in one pass, so it
is consistent while the server keeps writing (WAL readers do not block the writer) and it
finishes in bounded time; the sqlite3 backup API in steps restarts whenever another connection
writes between steps, which under load is forever. The copy is written beside the destination
and renamed into place once checked (``PRAGMA quick_check``, its head), mode 0600 since it holds
every prompt.

PostgreSQL: ``pg_dump --format=custom`` (one snapshot, by design), checked with
``pg_restore --list``; restore is ``pg_restore --single-transaction`` into an empty database.

A restored log gets a new epoch (log/epoch.py): its seq numbers will grow again from the
backup's head, so whatever remembered a position in the log it came from must not trust it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import make_url

from ledger.log.adhoc import sqlite_read_only_uri
from ledger.log.engines import create_async_db_engine, sqlite_url
from ledger.log.epoch import set_epoch
from ledger.log.errors import BadRequest, Conflict, LedgerError
from ledger.log.tables import log_identity

# (bytes done, bytes expected): the progress of a copy.
CopyProgress = Callable[[int, int], None]
_POLL_SECONDS = 0.1


class BackupFailed(LedgerError):
    status_code = 500


@dataclass(frozen=True)
class BackupReport:
    path: Path
    bytes: int
    seconds: float
    # SQLite: the copy's head seq and event count; PostgreSQL: None (read them after restore).
    head_seq: int | None
    events: int | None


def _refuse_existing(dest: Path) -> None:
    if dest.exists():
        raise Conflict(f"{dest} exists; a backup never overwrites a file")
    if not dest.parent.is_dir():
        raise BadRequest(f"{dest.parent} is not a directory")


def _partial(dest: Path) -> Path:
    return dest.with_name(dest.name + ".partial")


def _log_summary(path: Path) -> tuple[int, int]:
    """Check a SQLite copy and return its (head seq, event count)."""
    conn = sqlite3.connect(sqlite_read_only_uri(str(path)), uri=True)
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise BackupFailed(f"{path}: quick_check failed: {'; '.join(problems[:5])}")
        head, count = conn.execute("SELECT coalesce(max(seq), 0), count(*) FROM events").fetchone()
        return int(head), int(count)
    except sqlite3.DatabaseError as exc:
        raise BackupFailed(f"{path} is not a ledger database: {exc}") from exc
    finally:
        conn.close()


def _durable_rename(source: Path, dest: Path) -> None:
    os.chmod(source, 0o600)
    with source.open("rb") as handle:
        os.fsync(handle.fileno())
    os.rename(source, dest)
    directory = os.open(dest.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _copy_watching(
    copy: Callable[[], None], partial: Path, expected: int, progress: CopyProgress | None
) -> None:
    """Run ``copy`` on a thread, reporting the partial file's size until it ends."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            copy()
        except BaseException as exc:  # handed to the caller's thread below
            failure.append(exc)

    worker = threading.Thread(target=run, name="ledger-backup", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(_POLL_SECONDS)
        if progress is not None:
            progress(partial.stat().st_size if partial.exists() else 0, expected)
    if failure:
        raise failure[0]


def backup_sqlite(source: str, dest: Path, *, progress: CopyProgress | None = None) -> BackupReport:
    _refuse_existing(dest)
    partial = _partial(dest)
    partial.unlink(missing_ok=True)
    started = time.perf_counter()
    conn = sqlite3.connect(sqlite_read_only_uri(source), uri=True, check_same_thread=False)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        expected = (pages - free) * page_size

        def copy() -> None:
            conn.execute("VACUUM INTO ?", (str(partial),))

        try:
            _copy_watching(copy, partial, expected, progress)
        except sqlite3.Error as exc:
            partial.unlink(missing_ok=True)
            raise BackupFailed(f"VACUUM INTO {partial} failed: {exc}") from exc
    finally:
        conn.close()
    try:
        head, count = _log_summary(partial)
        _durable_rename(partial, dest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    size = dest.stat().st_size
    if progress is not None:
        progress(size, size)
    return BackupReport(dest, size, time.perf_counter() - started, head, count)


def _new_sqlite_epoch(path: Path) -> str | None:
    """Give a restored log a new epoch (a backup older than revision 0006 gets one when it is
    upgraded)."""
    engine = create_engine(sqlite_url(path, driver="sqlite+pysqlite"))
    try:
        with engine.begin() as conn:
            if log_identity.name not in inspect(conn).get_table_names():
                return None
            return set_epoch(conn)
    finally:
        engine.dispose()


def _refuse_non_empty(directory: Path) -> None:
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise Conflict(f"{directory} is not an empty directory; restore only into an empty one")


def restore_sqlite(
    source: Path, database: Path, data_dir: Path, *, progress: CopyProgress | None = None
) -> tuple[BackupReport, str | None]:
    """Copy a backup into an empty data directory; returns what was restored and its epoch."""
    if not source.is_file():
        raise BadRequest(f"{source} is not a file")
    _refuse_non_empty(data_dir)
    if database.exists():
        raise Conflict(f"{database} exists; restore only into an empty data directory")
    started = time.perf_counter()
    _log_summary(source)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    database.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = _partial(database)
    expected = source.stat().st_size

    def copy() -> None:
        # The backup API in one step: the source is a quiet file, nothing writes it.
        with sqlite3.connect(sqlite_read_only_uri(str(source)), uri=True) as src:
            dst = sqlite3.connect(partial)
            try:
                src.backup(dst)
            finally:
                dst.close()

    try:
        _copy_watching(copy, partial, expected, progress)
        epoch = _new_sqlite_epoch(partial)
        head, count = _log_summary(partial)
        _durable_rename(partial, database)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    size = database.stat().st_size
    return BackupReport(database, size, time.perf_counter() - started, head, count), epoch


# ---- PostgreSQL --------------------------------------------------------------------------


def _libpq(url: str) -> tuple[str, dict[str, str]]:
    """A libpq URL without the password, and the environment that carries it (so it never
    shows on a command line)."""
    parsed = make_url(url)
    env = dict(os.environ)
    if parsed.password is not None:
        env["PGPASSWORD"] = str(parsed.password)
    plain = parsed.set(drivername="postgresql", password=None, query={})
    return plain.render_as_string(hide_password=False), env


def _run(argv: list[str], env: dict[str, str], what: str) -> str:
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise BackupFailed(f"{argv[0]} is not installed (PostgreSQL client tools)") from exc
    if done.returncode != 0:
        raise BackupFailed(f"{what} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def check_pg_dump(path: Path, env: dict[str, str] | None = None) -> list[str]:
    """The archive's table of contents; refuses one without the event log's data."""
    listing = _run(["pg_restore", "--list", str(path)], env or dict(os.environ), "pg_restore")
    entries = [line for line in listing.splitlines() if line and not line.startswith(";")]
    wanted = ("TABLE DATA public events ", "TABLE DATA public alembic_version ")
    for name in wanted:
        if not any(name in line for line in entries):
            raise BackupFailed(f"{path}: the archive has no {name.strip()}")
    return entries


def backup_postgres(url: str, dest: Path) -> BackupReport:
    _refuse_existing(dest)
    partial = _partial(dest)
    partial.unlink(missing_ok=True)
    dsn, env = _libpq(url)
    started = time.perf_counter()
    try:
        _run(
            ["pg_dump", "--format=custom", "--no-owner", f"--file={partial}", f"--dbname={dsn}"],
            env,
            "pg_dump",
        )
        check_pg_dump(partial, env)
        _durable_rename(partial, dest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return BackupReport(dest, dest.stat().st_size, time.perf_counter() - started, None, None)


async def _postgres_tables(url: str) -> list[str]:
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(lambda sync: inspect(sync).get_table_names())
    finally:
        await engine.dispose()


async def _new_postgres_epoch(url: str) -> str | None:
    if log_identity.name not in await _postgres_tables(url):
        return None
    engine = create_async_db_engine(url, null_pool=True)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(set_epoch)
    finally:
        await engine.dispose()


def _checked_dump_size(source: Path, env: dict[str, str]) -> int:
    if not source.is_file():
        raise BadRequest(f"{source} is not a file")
    check_pg_dump(source, env)
    return source.stat().st_size


async def restore_postgres(source: Path, url: str) -> tuple[BackupReport, str | None]:
    """``pg_restore`` a dump into an empty database in one transaction; a new epoch."""
    dsn, env = _libpq(url)
    size = await asyncio.to_thread(_checked_dump_size, source, env)
    tables = await _postgres_tables(url)
    if tables:
        raise Conflict(
            f"the database has tables ({', '.join(sorted(tables)[:5])}); restore only into an "
            "empty database"
        )
    started = time.perf_counter()
    argv = ["pg_restore", "--no-owner", "--exit-on-error", "--single-transaction"]
    await asyncio.to_thread(_run, [*argv, f"--dbname={dsn}", str(source)], env, "pg_restore")
    epoch = await _new_postgres_epoch(url)
    seconds = time.perf_counter() - started
    return BackupReport(source, size, seconds, None, None), epoch
