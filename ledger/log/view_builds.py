"""Builds of the views: a view's rows live in tables of a numbered build, and readers see the
live build through SQL views of the stable names (docs/architecture.md, "Upgrades build the
views beside the live ones").

A view's code declares its tables under stable names (``capture_calls``, ...). In the database
those names are SQL views over the live build's tables (``capture_calls_b1``), so every read,
SQL view and ad-hoc query of a stable name stands, whichever build is live. When an upgrade
makes a view stale, the next build's tables are created beside the live ones, from the code's
own ``Table`` definitions, and the projector fills them from seq 0 (``view_builds.seq`` is that
build's checkpoint) while the live build keeps answering reads. The step that brings the build
to the head swaps it in, in the same transaction: the stable views point at its tables, the old
build is retired, the live checkpoints move to the build's. A reader sees the old build or the
new one, never a mix.

Retired builds: the swap does not drop the old build's tables, since on SQLite freeing their
pages takes as long as the tables are large, under the write lock the appends share. The
follower drops them afterwards, a short transaction at a time (``drop_retired_step``), when it
has nothing else to do or between its pages; then the build's row goes. A build that a newer
upgrade supersedes before it is swapped in is retired the same way.

Meanwhile the follower keeps the live build current too when its tables have the columns the
running code writes (log/projection_follower.py). When they do not (the upgrade changed a
view's columns, and the code that wrote them is no longer running), a rollout read whose events
came after the live checkpoint waits, as any read behind the views does (the freshness rule),
until the build is swapped in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    delete,
    false,
    func,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError

from ledger.log.errors import StorageDamaged
from ledger.log.metadata import NAMING_CONVENTION, metadata

view_builds = Table(
    "view_builds",
    metadata,
    Column("build", Integer, primary_key=True),
    # One live build (the one the stable names show); at most one other, being built.
    Column("live", Boolean, nullable=False),
    # A build being built: the seq it has applied the log up to (its checkpoint). The live
    # build's checkpoints are the views' own (view_checkpoints.py).
    Column("seq", BigInteger, nullable=False),
    # The head when the build started: what it must reach at least.
    Column("until_seq", BigInteger, nullable=True),
    # JSON {view: version}: the versions of the code that builds it (recorded when it is
    # swapped in, log/projection_versions.py).
    Column("versions", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # A build a swap replaced, or a newer upgrade superseded: its tables are dropped by the
    # views' follower a short transaction at a time, then its row (``drop_retired_step``).
    Column("retired", Boolean, nullable=False, server_default=false()),
)


# The build revision 0022 made of the tables the revisions before had created: its tables were
# renamed, and its indexes keep the names those revisions gave them.
FIRST_BUILD = 1


# How long a swap on PostgreSQL waits for readers of the live views before it gives up.
SWAP_LOCK_TIMEOUT_MS = 1000
# Rows of a retired build's table a step deletes on SQLite (``drop_retired_step``): a step holds
# the write lock the appends share.
RETIRED_ROWS_PER_STEP = 2000


def table_name(name: str, build: int) -> str:
    """The physical name of a view table (its stable name) in a build."""
    return f"{name}_b{build}"


def stable_name(physical: str, build: int) -> str:
    suffix = f"_b{build}"
    if not physical.endswith(suffix):
        raise ValueError(f"{physical} is not a table of build {build}")
    return physical[: -len(suffix)]


def build_tables(tables: Sequence[Table], build: int | None) -> tuple[Table, ...]:
    """The tables of ``build``: copies of the stable ``tables`` named for the build, indexes
    and constraints included (named for it too, since index names are per schema, except in
    the first build). ``None``: the stable tables themselves (a scratch file of ``ledger
    verify``, where no build exists)."""
    if build is None:
        return tuple(tables)
    copies = MetaData(naming_convention=NAMING_CONVENTION)
    built = []
    for table in tables:
        copy = Table(
            table_name(table.name, build), copies, *(column._copy() for column in table.columns)
        )
        for index in table.indexes:
            assert index.name is not None, f"{table.name}: an index without a name"
            Index(
                str(index.name) if build == FIRST_BUILD else table_name(str(index.name), build),
                *(copy.c[column.name] for column in index.columns),
                unique=index.unique,
            )
        built.append(copy)
    return tuple(built)


@dataclass(frozen=True)
class ViewBuild:
    build: int
    live: bool
    seq: int
    until_seq: int | None = None
    versions: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Builds:
    """The live build, the one being built, if any, and the retired ones whose tables are
    still to be dropped."""

    live: ViewBuild
    building: ViewBuild | None = None
    retired: tuple[int, ...] = ()


def read_builds(conn: Connection) -> Builds:
    rows = conn.execute(select(view_builds).order_by(view_builds.c.build)).all()
    found = [
        ViewBuild(
            build=int(row.build),
            live=bool(row.live),
            seq=int(row.seq),
            until_seq=None if row.until_seq is None else int(row.until_seq),
            versions=json.loads(row.versions) if row.versions else {},
        )
        for row in rows
        if not row.retired
    ]
    live = [build for build in found if build.live]
    if len(live) != 1:
        raise StorageDamaged(
            f"view_builds holds {len(live)} live builds, not one: which tables the views "
            "read is not known (docs/operations.md, 'A damaged store')"
        )
    building = [build for build in found if not build.live]
    return Builds(
        live=live[0],
        building=building[-1] if building else None,
        retired=tuple(int(row.build) for row in rows if row.retired),
    )


def start_build(
    conn: Connection, tables: Sequence[Table], versions: dict[str, int], head: int
) -> None:
    """Create the next build's tables (``tables``: the stable ones) beside the live build's,
    to be filled from seq 0; a build left unfinished is retired first (a newer upgrade
    supersedes it)."""
    builds = read_builds(conn)
    # Numbers only grow (a retired build keeps its row until its tables are gone), so a table
    # name never stands for two builds.
    number = int(conn.execute(select(func.max(view_builds.c.build))).scalar_one()) + 1
    if builds.building is not None:
        _retire(conn, builds.building.build)
    for table in build_tables(tables, number):
        table.create(conn)
    conn.execute(
        view_builds.insert().values(
            build=number,
            live=False,
            seq=0,
            until_seq=head,
            versions=json.dumps(versions, sort_keys=True),
            created_at=datetime.now(UTC),
        )
    )


def write_build_seq(conn: Connection, build: int, seq: int) -> None:
    conn.execute(update(view_builds).where(view_builds.c.build == build).values(seq=seq))


def swap_in(conn: Connection, tables: Sequence[Table], builds: Builds) -> None:
    """Make the build being built the live one: the stable names show its tables, and the old
    build is retired (its tables are dropped later, ``drop_retired_step``). ``tables``: the
    stable ones."""
    building = builds.building
    assert building is not None
    if conn.dialect.name == "postgresql":
        # A reader of the live views holds them until its transaction ends, and the swap would
        # wait for it holding the append lock: it gives up instead, and the follower tries
        # again (its transaction, the build's last page with it, rolls back).
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{SWAP_LOCK_TIMEOUT_MS}ms'")
    show_build(conn, (t.name for t in tables), building.build)
    _retire(conn, builds.live.build)
    conn.execute(
        update(view_builds)
        .where(view_builds.c.build == building.build)
        .values(live=True, until_seq=None)
    )


def _retire(conn: Connection, build: int) -> None:
    conn.execute(
        update(view_builds).where(view_builds.c.build == build).values(live=False, retired=True)
    )


def drop_retired_step(
    conn: Connection, names: Iterable[str], build: int, *, rows: int = RETIRED_ROWS_PER_STEP
) -> bool:
    """One short step of dropping retired ``build``'s tables (``names``: the stable ones), in
    the caller's write transaction; True when they are gone and its row with them.

    On SQLite a write transaction holds the database's one write lock, which the appends
    share, and dropping a table frees each of its pages: a step deletes at most ``rows`` rows
    of one table (in rowid order, so its pages are freed whole; its indexes' entries go with
    them), or drops a table already emptied. On PostgreSQL dropping a table unlinks its
    files, and one step drops them all (waiting for readers of the old tables at most the
    swap's lock timeout)."""
    left = [table_name(name, build) for name in names]
    left = [name for name in left if inspect(conn).has_table(name)]
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{SWAP_LOCK_TIMEOUT_MS}ms'")
        for name in left:
            conn.exec_driver_sql(f'DROP TABLE "{name}"')
    elif left:
        _sqlite_drop_step(conn, left[0], rows)
        return False
    conn.execute(delete(view_builds).where(view_builds.c.build == build, view_builds.c.retired))
    return True


def _sqlite_drop_step(conn: Connection, name: str, rows: int) -> None:
    # Rows first, their indexes' entries with them: each step then frees a bounded share of
    # every tree. Dropping an index or a table that still has rows visits each of its pages
    # in one transaction, as long as the tree is large (decisions follow-the-log 33); once
    # the table is empty, dropping it (its indexes with it) frees almost nothing.
    deleted = conn.exec_driver_sql(
        f'DELETE FROM "{name}" WHERE rowid IN '
        f'(SELECT rowid FROM "{name}" ORDER BY rowid LIMIT {int(rows)})'
    ).rowcount
    if deleted < rows:
        conn.exec_driver_sql(f'DROP TABLE "{name}"')


def is_lock_timeout(exc: DBAPIError) -> bool:
    """PostgreSQL's ``lock_not_available``: the swap's lock timeout passed."""
    orig = exc.orig
    return getattr(orig, "sqlstate", None) == "55P03" or getattr(orig, "pgcode", None) == "55P03"


def show_build(conn: Connection, names: Iterable[str], build: int) -> None:
    """Point the stable names (SQL views) at ``build``'s tables. PostgreSQL replaces each view
    in place, so the SQL views defined over it keep working; SQLite resolves a view's tables
    when it runs, so there a view is dropped and created again."""
    postgres = conn.dialect.name == "postgresql"
    for name in names:
        physical = table_name(name, build)
        if postgres:
            _replace_postgres_view(conn, name, physical)
        else:
            conn.exec_driver_sql(f'DROP VIEW IF EXISTS "{name}"')
            conn.exec_driver_sql(f'CREATE VIEW "{name}" AS SELECT * FROM "{physical}"')


def _columns(conn: Connection, relation: str) -> list[str]:
    rows = conn.execute(
        text(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = :name "
            "ORDER BY ordinal_position"
        ),
        {"name": relation},
    )
    return [str(row.column_name) for row in rows]


def _replace_postgres_view(conn: Connection, name: str, physical: str) -> None:
    """PostgreSQL replaces a view in place only with its columns in their order, new ones
    after: a table created by the revisions may order its columns otherwise than the code's
    definition (a column added later comes last), so the view keeps its own order. A column the
    new build lacks cannot be replaced in place: the views over it must then be dropped by the
    revision that removes it, and this says which."""
    new = _columns(conn, physical)
    old = _columns(conn, name)
    missing = [column for column in old if column not in new]
    if missing:
        raise RuntimeError(
            f"the new build of {name} lacks its columns {', '.join(missing)}: a revision must "
            "drop the SQL views that use them before the build is swapped in"
        )
    ordered = old + [column for column in new if column not in old]
    columns = ", ".join(f'"{column}"' for column in ordered)
    conn.exec_driver_sql(f'CREATE OR REPLACE VIEW "{name}" AS SELECT {columns} FROM "{physical}"')
