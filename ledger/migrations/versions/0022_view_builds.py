"""The views' tables live in numbered builds (log/view_builds.py): each view table is renamed to
its build-1 name (``capture_calls`` to ``capture_calls_b1``) and its stable name becomes a SQL
view over it, so every read, SQL view and ad-hoc query of the stable names stands. An upgrade
that makes a view stale then builds the next build's tables beside these and swaps them in.

No row changes. The SQL views defined over the renamed tables (``rollout_model_call_metrics``
and the others) keep naming the stable names: SQLite resolves a view's tables by name when it
runs (the renames run with ``legacy_alter_table`` so they do not rewrite those views), and on
PostgreSQL, where a view follows the table it was made over, each is made again from its own
text after the renames.

Down: the live build's tables get their stable names back, with their indexes and primary keys
(a build after the first names them for itself); a build that was running is dropped.

Revision ID: 0022_view_builds
Revises: 0021_entry_payloads_from_log
Create Date: 2026-12-06
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0022_view_builds"
down_revision: str | None = "0021_entry_payloads_from_log"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Named here, not imported: the view tables as they are at this revision.
VIEW_TABLES = (
    "capture_calls",
    "capture_call_counts",
    "observation_calls",
    "observation_records",
    "observation_tool_calls",
    "observation_gaps",
)
FIRST_BUILD = 1


def built(name: str, build: int) -> str:
    return f"{name}_b{build}"


def upgrade() -> None:
    op.create_table(
        "view_builds",
        sa.Column("build", sa.Integer(), nullable=False),
        sa.Column("live", sa.Boolean(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("until_seq", sa.BigInteger(), nullable=True),
        sa.Column("versions", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("build", name="pk_view_builds"),
    )
    conn = op.get_bind()
    conn.execute(
        sa.text(
            "INSERT INTO view_builds (build, live, seq, created_at) VALUES (:b, :live, 0, :at)"
        ),
        {"b": FIRST_BUILD, "live": True, "at": datetime.now(UTC)},
    )
    dependents = _dependent_views(conn, VIEW_TABLES)
    with _names_not_rewritten(conn):
        for name in VIEW_TABLES:
            conn.exec_driver_sql(f'ALTER TABLE "{name}" RENAME TO "{built(name, FIRST_BUILD)}"')
            conn.exec_driver_sql(
                f'CREATE VIEW "{name}" AS SELECT * FROM "{built(name, FIRST_BUILD)}"'
            )
    _make_again(conn, dependents)


def downgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT build, live FROM view_builds")).all()
    live = next(int(row.build) for row in rows if row.live)
    dependents = _dependent_views(conn, VIEW_TABLES)
    with _names_not_rewritten(conn):
        for row in rows:
            if not row.live:
                for name in VIEW_TABLES:
                    conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{built(name, int(row.build))}"')
                # The code before goes on from the live views' checkpoints: no rebuild runs.
                conn.exec_driver_sql("UPDATE view_checkpoints SET rebuild_until = NULL")
        for name in VIEW_TABLES:
            if conn.dialect.name == "postgresql":
                # Its dependents follow it until they are made again over the table.
                conn.exec_driver_sql(f'ALTER VIEW "{name}" RENAME TO "{name}_before_0022"')
            else:
                conn.exec_driver_sql(f'DROP VIEW "{name}"')
            conn.exec_driver_sql(f'ALTER TABLE "{built(name, live)}" RENAME TO "{name}"')
            if live != FIRST_BUILD:
                _rename_indexes(conn, name, live)
    _make_again(conn, dependents)
    if conn.dialect.name == "postgresql":
        for name in VIEW_TABLES:
            conn.exec_driver_sql(f'DROP VIEW "{name}_before_0022"')
    op.drop_table("view_builds")


class _names_not_rewritten:
    """SQLite rewrites the views naming a table it renames (to name the new table); with
    ``legacy_alter_table`` it leaves them, and they find the stable name again by name."""

    def __init__(self, conn: sa.Connection) -> None:
        self._sqlite = conn.dialect.name == "sqlite"
        self._conn = conn

    def __enter__(self) -> None:
        if self._sqlite:
            self._conn.exec_driver_sql("PRAGMA legacy_alter_table = ON")

    def __exit__(self, *exc: object) -> None:
        if self._sqlite:
            self._conn.exec_driver_sql("PRAGMA legacy_alter_table = OFF")


def _dependent_views(conn: sa.Connection, names: Sequence[str]) -> list[tuple[str, str]]:
    """On PostgreSQL, the views made over these tables or views (other than the stable views
    themselves), with their text; SQLite needs none (it resolves names when a view runs)."""
    if conn.dialect.name != "postgresql":
        return []
    rows = conn.execute(
        sa.text(
            "SELECT DISTINCT v.relname AS name, pg_get_viewdef(v.oid) AS body "
            "FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid "
            "JOIN pg_class v ON v.oid = r.ev_class JOIN pg_class t ON t.oid = d.refobjid "
            "WHERE t.relname = ANY(:names) AND v.relkind = 'v' AND v.oid <> t.oid "
            "AND NOT (v.relname = ANY(:names))"
        ),
        {"names": list(names)},
    ).all()
    return [(str(row.name), str(row.body)) for row in rows]


def _make_again(conn: sa.Connection, dependents: Sequence[tuple[str, str]]) -> None:
    for name, body in dependents:
        conn.exec_driver_sql(f'CREATE OR REPLACE VIEW "{name}" AS {body}')


def _rename_indexes(conn: sa.Connection, name: str, build: int) -> None:
    """A build after the first names its table's indexes and primary key for itself; the
    stable table's are named as the revisions before made them (as the first build's are)."""
    suffix = f"_b{build}"
    if conn.dialect.name == "postgresql":
        indexes = conn.execute(
            sa.text("SELECT indexname FROM pg_indexes WHERE tablename = :t"), {"t": name}
        ).scalars()
        for index in list(indexes):
            if index.endswith(suffix):
                conn.exec_driver_sql(f'ALTER INDEX "{index}" RENAME TO "{index[: -len(suffix)]}"')
        return
    indexes = conn.execute(
        sa.text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :t "
            "AND sql IS NOT NULL"
        ),
        {"t": name},
    ).all()
    for index in indexes:
        if index.name.endswith(suffix):
            stable = index.name[: -len(suffix)]
            conn.exec_driver_sql(f'DROP INDEX "{index.name}"')
            conn.exec_driver_sql(index.sql.replace(index.name, stable, 1))
