"""SQL of the health area: the selected rollouts, their stored records and their perf figures,
in the order their records last changed (the order ``ledger export`` writes them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, Connection, Select, and_, bindparam, select
from sqlalchemy import text as sql_text
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.areas.health.findings_store import DIGEST_SELECT, digest_of
from ledger.areas.health.selection import Selection, glob_to_like, literal_prefix
from ledger.areas.health.tables import health_findings
from ledger.areas.observations.tables import observation_records
from ledger.areas.runs.tables import run_labels
from ledger.gym.health.compact import CompactDigest
from ledger.log.tables import rollouts

PERF_COLUMNS = (
    "num_turns",
    "num_tool_calls",
    "token_observability_coverage",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "total_latency_ms",
)


def selection_params(selection: Selection, dialect_name: str) -> dict[str, Any]:
    """The values ``restricted`` binds, by parameter name. Which names are present is the
    statement's shape (``restricted`` adds a condition per name), so a statement compiled
    once per shape runs any selection of that shape with these values (summary_query.py)."""
    params: dict[str, Any] = {}
    if selection.ids is not None:
        if dialect_name == "sqlite":
            params["b_ids"] = selection.ids
            prefix = literal_prefix(selection.ids)
            if prefix:
                # Rollout ids are ASCII: prefix + DEL bounds them (see ``restricted``).
                params["b_ids_from"] = prefix
                params["b_ids_before"] = prefix + "\x7f"
        else:
            params["b_ids"] = glob_to_like(selection.ids)
    optional = {
        "b_since": selection.since,
        "b_until": selection.until,
        "b_task_id": selection.task_id,
        "b_run": selection.run,
    }
    params.update((name, value) for name, value in optional.items() if value is not None)
    return params


def restricted(
    query: Select[Any],
    selection: Selection,
    conn: Connection | AsyncConnection,  # its dialect
    *,
    with_findings: bool = False,
) -> Select[Any]:
    params = selection_params(selection, conn.dialect.name)

    def bound(name: str, column: ColumnElement[Any]) -> BindParameter[Any]:
        # Named, of the column's type: the driver path binds by these names (summary_query).
        return bindparam(name, params[name], type_=column.type)

    records = observation_records
    source: Any = records
    if "b_since" in params or "b_until" in params:
        # Only the time window reads rollouts (every record has its rollout's row: the join
        # filters nothing else, and costs a lookup per record).
        source = source.join(rollouts, rollouts.c.rollout_id == records.c.rollout_id)
    if "b_run" in params:
        # The label of the record's own generation (a delete ends both).
        source = source.join(
            run_labels,
            and_(
                run_labels.c.rollout_id == records.c.rollout_id,
                run_labels.c.generation == records.c.generation,
                run_labels.c.run_label == bound("b_run", run_labels.c.run_label),
            ),
        )
    if with_findings:
        source = source.outerjoin(
            health_findings, health_findings.c.rollout_id == records.c.rollout_id
        )
    query = query.select_from(source)
    if "b_ids" in params:
        column = records.c.rollout_id
        if conn.dialect.name == "sqlite":
            # GLOB, not LIKE: SQLite's LIKE ignores case, its GLOB does not (the glob's
            # characters hold no '[' for GLOB to read as a class), so SQL selects exactly what
            # ``Selection.matches`` does and the summary's aggregates can run in SQL.
            query = query.where(column.op("GLOB")(bound("b_ids", column)))
        else:
            query = query.where(column.like(bound("b_ids", column), escape="\\"))
        if "b_ids_from" in params:
            # The prefix's key range seeks the primary key (binary collation) whether or not
            # the planner turns the GLOB into one itself. Not on PostgreSQL, whose collation
            # need not order ids byte by byte.
            query = query.where(column >= bound("b_ids_from", column))
            query = query.where(column < bound("b_ids_before", column))
    if "b_since" in params:
        query = query.where(rollouts.c.updated_at >= bound("b_since", rollouts.c.updated_at))
    if "b_until" in params:
        query = query.where(rollouts.c.updated_at < bound("b_until", rollouts.c.updated_at))
    if "b_task_id" in params:
        query = query.where(records.c.task_id == bound("b_task_id", records.c.task_id))
    return query


def snapshot(conn: Connection) -> None:
    """Make the rest of this transaction read one snapshot (the transaction's first
    statement). SQLite's read transaction already does; PostgreSQL's default (read committed)
    takes a new one per statement."""
    if conn.dialect.name == "postgresql":
        conn.execute(sql_text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))


def selected_ids(conn: Connection, selection: Selection) -> list[str]:
    query = restricted(select(observation_records.c.rollout_id), selection, conn)
    rows = conn.execute(query.order_by(observation_records.c.last_seq))
    return [row.rollout_id for row in rows if selection.matches(row.rollout_id)]


@dataclass(frozen=True)
class SelectedRow:
    """A selected rollout, and its stored findings when they are as new as its record."""

    rollout_id: str
    last_seq: int
    digest: CompactDigest | None  # None: missing or stale, check the record on read


def selected_rows(conn: Connection, selection: Selection) -> list[SelectedRow]:
    """Every selected rollout in export order, with its findings row when fresh."""
    query = restricted(
        select(
            observation_records.c.rollout_id,
            observation_records.c.last_seq,
            health_findings.c.last_seq.label("findings_seq"),
            *DIGEST_SELECT,
        ),
        selection,
        conn,
        with_findings=True,
    ).order_by(observation_records.c.last_seq)
    result = conn.execute(query)
    selected = []
    for row in result.tuples():
        if not selection.matches(row[0]):
            continue
        fresh = row[2] is not None and row[2] == row[1]
        selected.append(SelectedRow(row[0], row[1], digest_of(row, 3) if fresh else None))
    return selected


def read_one_with_findings(
    conn: Connection, rollout_id: str
) -> tuple[int, CompactDigest | None] | None:
    """The record's last_seq and its findings row when fresh; None without a record."""
    row = (
        conn.execute(
            select(
                observation_records.c.last_seq,
                health_findings.c.last_seq.label("findings_seq"),
                *DIGEST_SELECT,
            )
            .select_from(
                observation_records.outerjoin(
                    health_findings,
                    health_findings.c.rollout_id == observation_records.c.rollout_id,
                )
            )
            .where(observation_records.c.rollout_id == rollout_id)
        )
    ).first()
    if row is None:
        return None
    fresh = row[1] is not None and row[1] == row[0]
    return int(row[0]), digest_of(tuple(row), 2) if fresh else None


def selected_perf_rows(conn: Connection, selection: Selection) -> list[dict[str, Any]]:
    """Per selected rollout: its id and the ``ng_perf`` figures its record carries
    (``num_turns`` is NULL exactly when the record has no ``ng_perf``)."""
    columns = [observation_records.c[name] for name in PERF_COLUMNS]
    query = restricted(select(observation_records.c.rollout_id, *columns), selection, conn)
    rows = conn.execute(query.order_by(observation_records.c.last_seq))
    return [dict(row._mapping) for row in rows if selection.matches(row.rollout_id)]
