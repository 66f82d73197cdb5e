"""SQL of the observations area: the view's reads and writes (sync, ``ViewSql``), and the reads
(async).

Every rollout read is one indexed lookup on ``observation_records`` by primary key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    Connection,
    Row,
    Select,
    Table,
    bindparam,
    delete,
    func,
    select,
    true,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import BindParameter

from ledger.areas.captures.queries import (
    load_state_and_counts,
    merge_gaps,
    state_and_counts_query,
)
from ledger.areas.captures.tables import capture_calls
from ledger.areas.observations.entry_payloads import StoredEntry, filled_entry
from ledger.areas.observations.record_payloads_from_log import (
    CapturedCall,
    chunks,
    filled_record,
    marked_seqs,
)
from ledger.areas.observations.record_pieces import CallPiece, CallTotals, fill
from ledger.areas.observations.tables import (
    observation_calls,
    observation_gaps,
    observation_records,
    observation_tool_calls,
)
from ledger.gym.capture_attachment import build_capture_attachment
from ledger.gym.model_calls import ModelCallRecord, dump_with_payloads
from ledger.log.canonical import compact_json, parse_json
from ledger.log.driver import DriverQuery, DriverStatement
from ledger.log.ended_generations import delete_rollouts
from ledger.log.tables import events, rollouts

AREA_TABLES = (observation_calls, observation_records, observation_tool_calls, observation_gaps)

# An entry's event is joined only when the entry takes its payloads from it.
_ENTRY_EVENT = (events.c.seq == capture_calls.c.seq) & (
    observation_calls.c.payloads_from_log == true()
)


@dataclass(frozen=True)
class RecordInputs:
    """What supersedes per rollout generation: the latest bundle and the latest result."""

    generation: int
    bundle_seq: int | None = None
    bundle: dict[str, Any] | None = None
    result_seq: int | None = None
    result: dict[str, Any] | None = None
    stored: bool = False
    call_totals: CallTotals = field(default_factory=CallTotals)


@dataclass(frozen=True)
class CapturedPosition:
    """A position the capture projector wrote: its ``call_index`` and its record without
    payloads (compact JSON in Gym's field order)."""

    call_index: int
    record: str


def entry_text(row: Row[Any]) -> str | None:
    """A stored entry's whole text, its payloads filled from ``row.event_payload`` when it
    takes them from its event."""
    text: str | None = row.trajectory_entry
    if text is None or not row.payloads_from_log:
        return text
    if row.event_payload is None:
        raise ValueError("a stored trajectory entry's event has no payload")
    return filled_entry(str(text), parse_json(row.event_payload)["exchange"])


@dataclass(frozen=True)
class ProjectedRecord:
    """One rollout's enriched record and the figures the SQL views show."""

    # The record as built (for a spliced record, its skeleton: see capture_only.py).
    record: dict[str, Any]
    text: str  # the stored JSON of the record, or its template when ``assembled``
    assembled: bool
    perf: dict[str, Any]  # the perf columns (``perf_columns``)
    task_id: str | None
    trajectory_rollout_id: str | None
    tool_calls: list[Mapping[str, Any]]
    gaps: list[tuple[str, Mapping[str, Any]]]
    # ``text`` holds markers a read fills from the log (record_payloads_from_log.py).
    payloads_from_log: bool = False


def perf_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    perf = record.get("ng_perf") or {}
    trajectory = record.get("ng_trajectory")
    return {
        "resolved": record.get("resolved"),
        "has_trajectory": isinstance(trajectory, Mapping),
        "num_invocations": len(trajectory["invocations"])
        if isinstance(trajectory, Mapping)
        else None,
        "num_model_calls": len(trajectory["model_calls"])
        if isinstance(trajectory, Mapping)
        else None,
        "num_turns": perf.get("num_turns"),
        "num_tool_calls": perf.get("num_tool_calls"),
        "token_observability_coverage": perf.get("token_observability_coverage"),
        "prompt_tokens": perf.get("prompt_tokens"),
        "cached_prompt_tokens": perf.get("cached_prompt_tokens"),
        "completion_tokens": perf.get("completion_tokens"),
        "reasoning_tokens": perf.get("reasoning_tokens"),
        "total_latency_ms": perf.get("total_latency_ms"),
    }


# ---- the view's side (sync, in the follower's transaction) --------------------------------


class ViewSql:
    """The observations view's reads and writes on the tables of one build (log/view_builds.py:
    its own, and the capture view's it reads when it flushes), each statement built once with
    bind parameters: the view runs them for every rollout of every page, and building a
    SQLAlchemy statement costs more than executing it."""

    def __init__(self, tables: Sequence[Table], capture_tables: Sequence[Table]) -> None:
        calls, records, tool_calls, gaps = tables
        captured, counts = capture_tables
        self.tables = tuple(tables)
        rollout: BindParameter[str] = bindparam("p_rollout_id")
        generation: BindParameter[int] = bindparam("p_generation")
        self._select_inputs = DriverQuery(
            select(
                records.c.generation,
                records.c.bundle_seq,
                records.c.bundle,
                records.c.result_seq,
                records.c.result,
                records.c.call_totals,
            ).where(records.c.rollout_id == rollout)
        )
        # A generation's calls with payloads: each stored record and its event's payload.
        self._select_calls = DriverQuery(
            select(captured.c.seq, captured.c.model_call_id, captured.c.record, events.c.payload)
            .select_from(captured.join(events, events.c.seq == captured.c.seq))
            .where(captured.c.rollout_id == rollout)
            .where(captured.c.generation == generation)
            .where(captured.c.record.is_not(None))
            .order_by(captured.c.call_index)
        )
        self._select_positions = DriverQuery(
            select(captured.c.seq, captured.c.call_index, captured.c.damaged, captured.c.record)
            .where(captured.c.rollout_id == rollout)
            .where(captured.c.generation == generation)
            .where(captured.c.seq >= bindparam("p_from_seq"))
        )
        call_join = calls.join(
            captured,
            (captured.c.rollout_id == calls.c.rollout_id)
            & (captured.c.generation == calls.c.generation)
            & (captured.c.call_index == calls.c.call_index),
        )
        entry_event = (events.c.seq == captured.c.seq) & (calls.c.payloads_from_log == true())
        self._select_pieces = DriverQuery(
            select(
                captured.c.record,
                calls.c.trajectory_entry,
                calls.c.payloads_from_log,
                events.c.payload.label("event_payload"),
            )
            .select_from(call_join.outerjoin(events, entry_event))
            .where(calls.c.rollout_id == rollout)
            .where(calls.c.generation == generation)
            .order_by(calls.c.call_index)
        )
        self._state_and_counts = state_and_counts_query(counts)
        self._insert_call = DriverStatement(calls.insert())
        delete_calls = delete(calls).where(calls.c.rollout_id == rollout)
        self._delete_calls = DriverStatement(delete_calls)
        self._delete_generation_calls = DriverStatement(
            delete_calls.where(calls.c.generation == generation)
        )
        self._insert_record = DriverStatement(records.insert())
        self._update_record = DriverStatement(
            records.update().where(records.c.rollout_id == rollout)
        )
        self._insert_tool_call = DriverStatement(tool_calls.insert())
        self._insert_gap = DriverStatement(gaps.insert())
        self._replace_rows = [
            DriverStatement(delete(table).where(table.c.rollout_id == rollout))
            for table in (tool_calls, gaps)
        ]

    def load_inputs(self, conn: Connection, rollout_id: str, generation: int) -> RecordInputs:
        row = self._select_inputs.first(conn, {"p_rollout_id": rollout_id})
        if row is None:
            return RecordInputs(generation=generation)
        if row.generation != generation:
            # A row of an ended generation: its inputs do not carry over to the new one.
            return RecordInputs(generation=generation, stored=True)
        return RecordInputs(
            generation=generation,
            bundle_seq=row.bundle_seq,
            bundle=json.loads(row.bundle) if row.bundle is not None else None,
            result_seq=row.result_seq,
            result=json.loads(row.result) if row.result is not None else None,
            stored=True,
            call_totals=CallTotals.load(row.call_totals),
        )

    def captured_positions(
        self, conn: Connection, rollout_id: str, generation: int, from_seq: int
    ) -> dict[int, CapturedPosition]:
        """The record positions of the rollout generation written by events at ``from_seq`` or
        later, by event seq (damaged positions are left out: Gym's merge skips them)."""
        rows = self._select_positions.all(
            conn,
            {"p_rollout_id": rollout_id, "p_generation": generation, "p_from_seq": from_seq},
        )
        return {
            int(row.seq): CapturedPosition(int(row.call_index), str(row.record))
            for row in rows
            if not row.damaged and row.record is not None
        }

    def store_call(
        self,
        conn: Connection,
        rollout_id: str,
        generation: int,
        call_index: int,
        entry: StoredEntry,
    ) -> None:
        """One kept call: its trajectory entry as stored (entry_payloads.py)."""
        self._insert_call.execute(
            conn,
            {
                "rollout_id": rollout_id,
                "generation": generation,
                "call_index": call_index,
                "trajectory_entry": entry.text,
                "payloads_from_log": entry.payloads_from_log,
            },
        )

    def load_call_pieces(
        self, conn: Connection, rollout_id: str, generation: int
    ) -> list[CallPiece]:
        """The JSON each stored call puts into a capture-only record, in ``call_index``
        order."""
        rows = self._select_pieces.all(
            conn, {"p_rollout_id": rollout_id, "p_generation": generation}
        )
        return [CallPiece(str(row.record), entry_text(row)) for row in rows]

    def forget_calls(
        self, conn: Connection, rollout_id: str, generation: int | None = None
    ) -> None:
        if generation is None:
            self._delete_calls.execute(conn, {"p_rollout_id": rollout_id})
        else:
            self._delete_generation_calls.execute(
                conn, {"p_rollout_id": rollout_id, "p_generation": generation}
            )

    def forget_rollouts(self, conn: Connection, ended: Sequence[tuple[str, int]]) -> None:
        """Every row of these rollouts (tombstones: ended generations), one statement per
        table."""
        for table in self.tables:
            delete_rollouts(conn, table, ended)

    def load_capture_attachment(
        self, conn: Connection, rollout_id: str, generation: int
    ) -> tuple[dict[str, Any], dict[str, CapturedCall]]:
        """``ng_model_call_capture`` of the rollout generation, calls WITH payloads (Gym's
        merge), and where each call's payloads are in the log, by ``model_call_id``.

        Calls come from the capture view's records (``capture_calls``, in ``call_index``
        order) with their payloads from their events; the merge gaps from the capture tables.
        """
        rows = self._select_calls.all(
            conn, {"p_rollout_id": rollout_id, "p_generation": generation}
        )
        records = []
        captured = {}
        for row in rows:
            exchange = parse_json(row.payload)["exchange"]
            records.append(
                ModelCallRecord.model_validate(dump_with_payloads(parse_json(row.record), exchange))
            )
            captured[str(row.model_call_id)] = CapturedCall(int(row.seq), exchange)
        gaps = self.capture_gaps_of(conn, rollout_id, generation)
        attachment = build_capture_attachment(rollout_id, records, gaps, include_payloads=True)
        return attachment, captured

    def capture_gaps_of(
        self, conn: Connection, rollout_id: str, generation: int
    ) -> list[dict[str, Any]]:
        """Gym's merge gaps of a rollout generation, from the capture tables (the capture
        view's counts are applied before this view flushes: area order)."""
        return merge_gaps(
            *load_state_and_counts(conn, rollout_id, generation, query=self._state_and_counts)
        )

    def write_record(
        self,
        conn: Connection,
        rollout_id: str,
        inputs: RecordInputs,
        projected: ProjectedRecord,
        *,
        seq: int,
        projection_failed: bool,
    ) -> None:
        values = {
            "generation": inputs.generation,
            "last_seq": seq,
            "bundle_seq": inputs.bundle_seq,
            "bundle": compact_json(inputs.bundle) if inputs.bundle is not None else None,
            "result_seq": inputs.result_seq,
            "result": compact_json(inputs.result) if inputs.result is not None else None,
            "task_id": projected.task_id,
            "trajectory_rollout_id": projected.trajectory_rollout_id,
            "projection_failed": projection_failed,
            "gap_count": len(projected.gaps),
            "record": projected.text,
            "assembled": projected.assembled,
            "payloads_from_log": projected.payloads_from_log,
            "call_totals": inputs.call_totals.dump() if inputs.call_totals.count else None,
            **projected.perf,
        }
        if inputs.stored:
            self._update_record.execute(conn, {**values, "p_rollout_id": rollout_id})
        else:
            self._insert_record.execute(conn, {**values, "rollout_id": rollout_id})
        for statement in self._replace_rows:
            statement.execute(conn, {"p_rollout_id": rollout_id})
        for position, tool in enumerate(projected.tool_calls):
            self._insert_tool_call.execute(
                conn,
                {
                    "rollout_id": rollout_id,
                    "position": position,
                    "generation": inputs.generation,
                    "invocation_id": tool["invocation_id"],
                    "tool_call_id": tool["tool_call_id"],
                    "tool_name": tool.get("tool_name"),
                    "status": tool["status"],
                    "timing_source": tool.get("timing_source"),
                    "sandbox_id": tool.get("sandbox_id"),
                    "started_at": tool.get("started_at"),
                    "completed_at": tool.get("completed_at"),
                    "duration_ms": tool.get("duration_ms"),
                    "error_type": tool.get("error_type"),
                },
            )
        for position, (document, gap) in enumerate(projected.gaps):
            self._insert_gap.execute(
                conn,
                {
                    "rollout_id": rollout_id,
                    "position": position,
                    "generation": inputs.generation,
                    "document": document,
                    "code": gap["code"],
                    "invocation_id": gap.get("invocation_id"),
                    "detail": gap.get("detail"),
                },
            )


# ---- reads (async) -------------------------------------------------------------------------


# A record and, when it is a template, the pieces that fill it, in ONE statement: on PostgreSQL
# (read committed) two statements could see different commits.
_RECORD_AND_PIECES = (
    select(
        observation_records.c.record,
        observation_records.c.assembled,
        observation_records.c.payloads_from_log.label("record_payloads_from_log"),
        capture_calls.c.record.label("capture_entry"),
        observation_calls.c.trajectory_entry,
        observation_calls.c.payloads_from_log,
        events.c.payload.label("event_payload"),
    )
    .select_from(
        observation_records.outerjoin(
            observation_calls,
            (observation_calls.c.rollout_id == observation_records.c.rollout_id)
            & (observation_calls.c.generation == observation_records.c.generation)
            & (observation_records.c.assembled == true()),
        )
        .outerjoin(
            capture_calls,
            (capture_calls.c.rollout_id == observation_calls.c.rollout_id)
            & (capture_calls.c.generation == observation_calls.c.generation)
            & (capture_calls.c.call_index == observation_calls.c.call_index),
        )
        .outerjoin(events, _ENTRY_EVENT)
    )
    .where(observation_records.c.rollout_id == bindparam("p_rollout_id"))
    .order_by(observation_calls.c.call_index)
)


def _record_text(rows: Sequence[Row[Any]]) -> str | None:
    if not rows:
        return None
    first = rows[0]
    if not first.assembled:
        return str(first.record)
    pieces = [
        CallPiece(str(row.capture_entry), entry_text(row))
        for row in rows
        if row.capture_entry is not None
    ]
    return fill(str(first.record), pieces)


# The exchanges of the events a stored record takes payloads from. Events never change, so
# this second statement cannot see another state than the record's.
_EVENT_PAYLOADS = select(events.c.seq, events.c.payload).where(
    events.c.seq.in_(bindparam("p_seqs", expanding=True))
)


def _exchanges(rows: Sequence[Row[Any]]) -> dict[int, Any]:
    return {int(row.seq): parse_json(row.payload)["exchange"] for row in rows}


def _takes_payloads_from_log(rows: Sequence[Row[Any]]) -> bool:
    return bool(rows) and bool(rows[0].record_payloads_from_log)


async def _read_exchanges(conn: AsyncConnection, seqs: set[int]) -> dict[int, Any]:
    exchanges: dict[int, Any] = {}
    for chunk in chunks(seqs):
        exchanges |= _exchanges((await conn.execute(_EVENT_PAYLOADS, {"p_seqs": chunk})).all())
    return exchanges


async def read_record_text(conn: AsyncConnection, rollout_id: str) -> str | None:
    """The enriched record (JSON text) of the rollout's current generation, exactly the bytes
    a reader gets (a template filled with its pieces: record_pieces.py; a whole record's
    payloads filled from the log: record_payloads_from_log.py)."""
    rows = (await conn.execute(_RECORD_AND_PIECES, {"p_rollout_id": rollout_id})).all()
    text = _record_text(rows)
    if text is None or not _takes_payloads_from_log(rows):
        return text
    return filled_record(text, await _read_exchanges(conn, marked_seqs(text)))


def read_exchanges_sync(conn: Connection, seqs: set[int]) -> dict[int, Any]:
    """The exchanges of these captures' events, by seq (whole records' payloads)."""
    exchanges: dict[int, Any] = {}
    for chunk in chunks(seqs):
        exchanges |= _exchanges(conn.execute(_EVENT_PAYLOADS, {"p_seqs": chunk}).all())
    return exchanges


def read_record_text_sync(conn: Connection, rollout_id: str) -> str | None:
    """``read_record_text`` on a synchronous connection (``LedgerStore.read_sync``,
    migrations)."""
    rows = conn.execute(_RECORD_AND_PIECES, {"p_rollout_id": rollout_id}).all()
    text = _record_text(rows)
    if text is None or not _takes_payloads_from_log(rows):
        return text
    return filled_record(text, read_exchanges_sync(conn, marked_seqs(text)))


@dataclass(frozen=True)
class ExportFilter:
    """Which records an export streams. Seqs bound the seq of each record's latest change."""

    after_seq: int = 0
    until_seq: int | None = None
    state: str | None = None
    task_id: str | None = None


@dataclass(frozen=True)
class ExportedRecord:
    rollout_id: str
    last_seq: int
    record: str


def _filtered(query: Select[Any], selection: ExportFilter, *, after_seq: int) -> Select[Any]:
    query = query.where(observation_records.c.last_seq > after_seq)
    if selection.until_seq is not None:
        query = query.where(observation_records.c.last_seq <= selection.until_seq)
    if selection.task_id is not None:
        query = query.where(observation_records.c.task_id == selection.task_id)
    if selection.state is not None:
        query = query.join(
            rollouts, rollouts.c.rollout_id == observation_records.c.rollout_id
        ).where(rollouts.c.state == selection.state)
    return query


async def export_page(
    conn: AsyncConnection, selection: ExportFilter, *, after_seq: int, limit: int
) -> list[ExportedRecord]:
    """One page of records in ``last_seq`` order (keyset paging: constant memory, any size)."""
    query = _filtered(
        select(
            observation_records.c.rollout_id,
            observation_records.c.last_seq,
            observation_records.c.record,
            observation_records.c.assembled,
            observation_records.c.payloads_from_log,
        ).select_from(observation_records),
        selection,
        after_seq=after_seq,
    )
    rows = (await conn.execute(query.order_by(observation_records.c.last_seq).limit(limit))).all()
    texts = []
    for row in rows:
        record = str(row.record)
        if row.assembled:  # a template: read it again with its pieces, in one statement
            record = await read_record_text(conn, row.rollout_id) or record
        texts.append(record)
    # The page's whole records take their payloads from the log: one read of those events.
    marked = [row.payloads_from_log and not row.assembled for row in rows]
    seqs = {
        seq for text, fill in zip(texts, marked, strict=True) if fill for seq in marked_seqs(text)
    }
    exchanges = await _read_exchanges(conn, seqs) if seqs else {}
    return [
        ExportedRecord(
            row.rollout_id, row.last_seq, filled_record(text, exchanges) if fill else text
        )
        for row, text, fill in zip(rows, texts, marked, strict=True)
    ]


async def count_exported(conn: AsyncConnection, selection: ExportFilter) -> int:
    query = _filtered(
        select(func.count()).select_from(observation_records),
        selection,
        after_seq=selection.after_seq,
    )
    return int((await conn.execute(query)).scalar_one())
