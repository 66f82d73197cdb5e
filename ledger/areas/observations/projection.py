"""Projections of the observations area: each rollout's enriched record as a materialized view.

Whenever a capture, an observation bundle or a result of a rollout is in a page of the log this
view follows, the rollout's joined observations, ``ng_trajectory`` and ``ng_perf`` are
recomputed (the pure functions of ``ledger.gym``), once per page, in ``flush``. This view
flushes after the capture view (area order), so by then ``capture_calls`` and
``capture_call_counts`` include the page's events; the write side's ``capture_state`` and
``rollouts`` are at the head. A rollout with captures only is stored as a template filled on read
(capture_only.py, record_pieces.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Connection, Table

from ledger.areas.captures.derivation import DerivedCall, trajectory_entry_dump
from ledger.areas.captures.events import (
    CAPTURE_CLEARED,
    CAPTURE_MARKED_INCOMPLETE,
    CAPTURE_PENDING_ANNOUNCED,
    CAPTURE_PENDING_WITHDRAWN,
    MODEL_CALL_CAPTURED,
    MODEL_CALL_DAMAGED,
)
from ledger.areas.captures.tables import capture_call_counts, capture_calls
from ledger.areas.observations.capture_only import CaptureOnlyAssembler
from ledger.areas.observations.entry_payloads import stored_entry
from ledger.areas.observations.events import OBSERVATIONS_RECORDED, RESULT_RECORDED
from ledger.areas.observations.queries import (
    AREA_TABLES,
    ProjectedRecord,
    RecordInputs,
    ViewSql,
    perf_columns,
)
from ledger.areas.observations.record_payloads_from_log import CapturedCall, stored_record
from ledger.areas.observations.record_pieces import CallTotals, fill
from ledger.gym.model_calls import AGGREGATE_FIELDS, dump_with_payloads
from ledger.gym.record import TRAJECTORY_PROJECTION_FAILED, RolloutEvidence, enrich_record
from ledger.gym.result import RolloutResult, trajectory_identity
from ledger.log.canonical import compact_json, parse_json
from ledger.log.ended_generations import EndedGenerations
from ledger.log.projector import Projector
from ledger.log.records import StoredEvent
from ledger.log.rollout_events import ROLLOUT_DELETED
from ledger.log.view_builds import build_tables

CAPTURE_KINDS = frozenset(
    {
        MODEL_CALL_CAPTURED,
        MODEL_CALL_DAMAGED,
        CAPTURE_MARKED_INCOMPLETE,
        CAPTURE_CLEARED,
        CAPTURE_PENDING_ANNOUNCED,
        CAPTURE_PENDING_WITHDRAWN,
    }
)
_HANDLED = CAPTURE_KINDS | {OBSERVATIONS_RECORDED, RESULT_RECORDED, ROLLOUT_DELETED}
GAP_DOCUMENTS = ("ng_model_call_capture", "ng_agent_observations")
# Rollouts whose records a replay keeps deferred at most (their inputs, bundle and result
# included, are held in memory): more than the rollouts a Gym run writes at a time.
DEFERRED_RECORDS = 512


def _gaps_of(document: object) -> list[Mapping[str, Any]]:
    if not isinstance(document, Mapping) or not isinstance(document.get("gaps"), list):
        return []
    return [gap for gap in document["gaps"] if isinstance(gap, Mapping)]


def project(
    rollout_id: str,
    inputs: RecordInputs,
    capture: dict[str, Any],
    captured: Mapping[str, CapturedCall],
) -> ProjectedRecord:
    """The enriched record of one rollout generation and the rows the SQL views read; its text
    takes the captured calls' payloads from the log (``captured``: where each call's are)."""
    result = RolloutResult.model_validate(inputs.result) if inputs.result is not None else None
    record = enrich_record(
        RolloutEvidence(
            rollout_id=rollout_id, capture=capture, observations=inputs.bundle, result=result
        )
    )
    identity = trajectory_identity(result, rollout_id)
    trajectory = record.get("ng_trajectory")
    if isinstance(trajectory, Mapping):
        gaps = [("ng_trajectory", gap) for gap in _gaps_of(trajectory)]
        tool_calls = list(trajectory["tool_calls"])
    else:
        gaps = [(name, gap) for name in GAP_DOCUMENTS for gap in _gaps_of(record.get(name))]
        tool_calls = []
    stored = stored_record(record, captured)
    return ProjectedRecord(
        record=record,
        text=stored.text,
        payloads_from_log=stored.payloads_from_log,
        assembled=False,
        perf=perf_columns(record),
        task_id=identity.task_id,
        trajectory_rollout_id=identity.rollout_id,
        tool_calls=tool_calls,
        gaps=gaps,
    )


@dataclass
class _Pending:
    """A rollout whose record must be recomputed when the command ends."""

    generation: int
    last_seq: int
    bundle: tuple[int, dict[str, Any]] | None = None
    result: tuple[int, dict[str, Any]] | None = None
    # Captures since the command began (or since the rollout's last clear in it): (seq,
    # exchange, what was derived from it before the writer or None).
    calls: list[tuple[int, dict[str, Any], object]] = field(default_factory=list)
    # A clear in this command: the stored call totals no longer count.
    cleared: bool = False


class ObservationsProjector:
    """Keeps inputs as events arrive; recomputes each touched rollout's record once per page.

    Recomputing on every event made a batch of n captures to one rollout cost O(n²): the record
    is rebuilt from all its calls. ``apply`` therefore only records what changed, and ``flush``
    (called when a page's events are all applied, in the page's transaction) rebuilds each
    touched rollout once. The result is the same as rebuilding after every event:
    the record is a function of the stored inputs and the last event's seq.
    """

    name = "observations"
    # 2: entries take their payloads from the log, no ``call`` (revision 0021).
    version = 2
    follows_log = True

    def __init__(self, *, check_templates: bool = False, build: int | None = None) -> None:
        # ``build``: the build whose tables it writes and reads, with the capture view's of the
        # same build (log/view_builds.py); None, the stable tables (a scratch replay).
        self._sql = ViewSql(
            build_tables(AREA_TABLES, build),
            build_tables((capture_calls, capture_call_counts), build),
        )
        self.tables: tuple[Table, ...] = self._sql.tables
        self._pending: dict[str, _Pending] = {}
        self._assembler = CaptureOnlyAssembler()
        # On for `ledger verify`: every capture-only record is also rebuilt in full, and its
        # template kept only if it gives the same record (see ``_project``).
        self._check_templates = check_templates
        # Checks deferred by a replay: rollout -> (generation, last seq) of the templates stored
        # unchecked. The check rebuilds the whole record, so a replay runs it once, on the final
        # rows (``check_at_end``), not on every flush: O(calls) per rollout, not per event.
        self._unchecked: dict[str, tuple[int, int]] = {}
        self._defer_checks = False
        # A replay (``defer_checks``) also defers the records themselves: rollout -> its inputs
        # and last seq, kept in memory until ``check_at_end`` builds each record once. Built at
        # every flush instead (a page of the log), a rollout spanning k pages cost k builds of
        # its whole record: O(calls²/page) for a long one, and the largest part of a replay.
        self._deferred: dict[str, tuple[RecordInputs, int]] = {}
        self._defer_records = False
        # Rollouts deleted in this command, their rows removed together (ended_generations.py).
        self._ended = EndedGenerations()

    def handles(self, kind: str) -> bool:
        return kind in _HANDLED

    def apply(self, conn: Connection, event: StoredEvent) -> None:
        rollout_id = event.rollout_id
        if rollout_id is None:
            return
        if event.kind == ROLLOUT_DELETED:
            self._ended.add(rollout_id, event.generation)
            self._pending.pop(rollout_id, None)
            self._unchecked.pop(rollout_id, None)
            self._deferred.pop(rollout_id, None)
            return
        # Any other event reads or writes rows a pending removal would change.
        self._remove_ended(conn)
        pending = self._pending.get(rollout_id)
        if pending is None or pending.generation != event.generation:
            pending = self._pending[rollout_id] = _Pending(event.generation, event.seq)
        pending.last_seq = event.seq
        payload = event.payload
        if event.kind == MODEL_CALL_CAPTURED and payload is not None:
            pending.calls.append((event.seq, payload["exchange"], event.derived))
        elif event.kind == CAPTURE_CLEARED:
            self._sql.forget_calls(conn, rollout_id, event.generation)
            pending.calls = []
            pending.cleared = True
        elif event.kind == OBSERVATIONS_RECORDED and payload is not None:
            pending.bundle = (event.seq, payload["bundle"])
        elif event.kind == RESULT_RECORDED and payload is not None:
            pending.result = (event.seq, payload)

    def _remove_ended(self, conn: Connection) -> None:
        if self._ended:
            self._sql.forget_rollouts(conn, self._ended.take())

    def flush(self, conn: Connection) -> None:
        # A deleted rollout is not among the pending ones (apply drops it there).
        self._remove_ended(conn)
        pending_rollouts, self._pending = self._pending, {}
        for rollout_id, pending in pending_rollouts.items():
            kept = self._keep_calls(conn, rollout_id, pending) if pending.calls else []
            inputs = self._inputs(conn, rollout_id, pending.generation)
            totals = CallTotals() if pending.cleared else inputs.call_totals
            for figures, has_entry in kept:
                totals = totals.add(figures, has_entry=has_entry)
            inputs = replace(inputs, call_totals=totals)
            if pending.bundle is not None:
                inputs = replace(inputs, bundle_seq=pending.bundle[0], bundle=pending.bundle[1])
            if pending.result is not None:
                inputs = replace(inputs, result_seq=pending.result[0], result=pending.result[1])
            if self._defer_records:
                self._defer(conn, rollout_id, inputs, pending.last_seq)
                continue
            check = self._check_templates and not self._defer_checks
            projected = self._project(conn, rollout_id, inputs, check=check)
            if self._defer_checks and projected.assembled:
                self._unchecked[rollout_id] = (pending.generation, pending.last_seq)
            else:
                self._unchecked.pop(rollout_id, None)
            _write(self._sql, conn, rollout_id, inputs, projected, pending.last_seq)

    def defer_checks(self) -> None:
        """From now on (a replay: ``ledger verify``, a rebuild) checks wait for
        ``check_at_end``, and so do the records: each touched rollout's is built there once."""
        self._defer_checks = self._check_templates
        self._defer_records = True

    def _inputs(self, conn: Connection, rollout_id: str, generation: int) -> RecordInputs:
        """The rollout's stored inputs, or the deferred ones not written yet."""
        deferred = self._deferred.get(rollout_id)
        if deferred is not None:
            inputs, last_seq = deferred
            if inputs.generation == generation:
                return inputs
            # Another generation's: written as the flush would have (its row is then replaced).
            del self._deferred[rollout_id]
            self._write_deferred(conn, rollout_id, inputs, last_seq)
        return self._sql.load_inputs(conn, rollout_id, generation)

    def _defer(self, conn: Connection, rollout_id: str, inputs: RecordInputs, seq: int) -> None:
        # Most recently touched last; past the bound the least recently touched are written
        # now (memory stays bounded; one touched again later is built again, as before).
        self._deferred.pop(rollout_id, None)
        self._deferred[rollout_id] = (inputs, seq)
        while len(self._deferred) > DEFERRED_RECORDS:
            oldest = next(iter(self._deferred))
            self._write_deferred(conn, oldest, *self._deferred.pop(oldest))

    def _write_deferred(
        self, conn: Connection, rollout_id: str, inputs: RecordInputs, last_seq: int
    ) -> None:
        projected = self._project(conn, rollout_id, inputs, check=self._check_templates)
        _write(self._sql, conn, rollout_id, inputs, projected, last_seq)

    def check_at_end(self, conn: Connection) -> None:
        """The deferred records, each built once from its final inputs (checked: the template
        kept only if it gives the full record). Then the stored templates against full
        rebuilds; a template that does not give the full record is replaced by it (so the
        comparison with the live tables reports it)."""
        # A deferred rollout's row may not exist yet: the next write inserts it (``stored``).
        deferred, self._deferred = self._deferred, {}
        for rollout_id, (inputs, last_seq) in deferred.items():
            self._write_deferred(conn, rollout_id, inputs, last_seq)
        unchecked, self._unchecked = self._unchecked, {}
        for rollout_id, (generation, last_seq) in unchecked.items():
            inputs = self._sql.load_inputs(conn, rollout_id, generation)
            projected = self._project(conn, rollout_id, inputs, check=True)
            if not projected.assembled:
                _write(self._sql, conn, rollout_id, inputs, projected, last_seq)

    def discard(self) -> None:
        self._pending = {}
        self._ended.clear()

    def _project(
        self, conn: Connection, rollout_id: str, inputs: RecordInputs, *, check: bool
    ) -> ProjectedRecord:
        assembled = None
        if inputs.bundle is None and inputs.result is None:
            assembled = assemble_capture_only(self._sql, conn, self._assembler, rollout_id, inputs)
        if assembled is not None and not check:
            return assembled
        capture, captured = self._sql.load_capture_attachment(conn, rollout_id, inputs.generation)
        full = project(rollout_id, inputs, capture, captured)
        if assembled is not None:
            # Checking (``ledger verify``): the template is kept only if it gives exactly the
            # full record, so a template the writer stored that does not is reported.
            pieces = self._sql.load_call_pieces(conn, rollout_id, inputs.generation)
            if (
                fill(assembled.text, pieces) == compact_json(full.record)
                and assembled.perf == full.perf
                and assembled.gaps == full.gaps
                and assembled.tool_calls == full.tool_calls
            ):
                return assembled
        return full

    def _keep_calls(
        self, conn: Connection, rollout_id: str, pending: _Pending
    ) -> list[tuple[dict[str, Any], bool]]:
        """Keep each captured call's trajectory entry (its payloads left in the event:
        entry_payloads.py), at the position the capture view gave it. The entry comes from the
        page's derivation (``StoredEvent.derived``) when there is one, so a capture is derived
        once for both views.

        Returns each kept call's metric figures and whether it has a trajectory entry, in
        ``call_index`` order, for the rollout's running totals."""
        kept: list[tuple[dict[str, Any], bool]] = []
        positions = self._sql.captured_positions(
            conn, rollout_id, pending.generation, pending.calls[0][0]
        )
        for seq, exchange, derived in pending.calls:
            position = positions.get(seq)
            if position is None:  # a damaged position: Gym's merge skips it
                continue
            if isinstance(derived, DerivedCall) and derived.record is not None:
                # Derived at position 0 (areas/captures/derivation.py): neither the figures
                # nor the entry depend on the position.
                record, entry = derived.record, derived.trajectory_entry
            else:
                record = parse_json(position.record)
                entry = trajectory_entry_dump(dump_with_payloads(record, exchange))
            self._sql.store_call(
                conn, rollout_id, pending.generation, position.call_index, stored_entry(entry)
            )
            kept.append(({name: record[name] for name in AGGREGATE_FIELDS}, entry is not None))
        return kept


def _write(
    sql: ViewSql,
    conn: Connection,
    rollout_id: str,
    inputs: RecordInputs,
    projected: ProjectedRecord,
    seq: int,
) -> None:
    failed = any(
        gap.get("code") == TRAJECTORY_PROJECTION_FAILED
        for name in ("ng_trajectory", *GAP_DOCUMENTS)
        for gap in _gaps_of(projected.record.get(name))
    )
    sql.write_record(conn, rollout_id, inputs, projected, seq=seq, projection_failed=failed)


def assemble_capture_only(
    sql: ViewSql,
    conn: Connection,
    assembler: CaptureOnlyAssembler,
    rollout_id: str,
    inputs: RecordInputs,
) -> ProjectedRecord | None:
    """The record of a rollout generation with captures only, as a template (stored text) that
    reads fill with its calls' pieces (capture_only.py); None when it must be
    rebuilt in full."""
    gaps = sql.capture_gaps_of(conn, rollout_id, inputs.generation)
    assembled = assembler.assemble(rollout_id, inputs.call_totals, gaps)
    if assembled is None:
        return None
    skeleton = assembled.skeleton
    trajectory = skeleton["ng_trajectory"]
    identity = trajectory_identity(None, rollout_id)
    return ProjectedRecord(
        record=skeleton,
        text=assembled.template,
        assembled=True,
        perf={**perf_columns(skeleton), "num_model_calls": assembled.num_calls},
        task_id=identity.task_id,
        trajectory_rollout_id=identity.rollout_id,
        tool_calls=list(trajectory["tool_calls"]),
        gaps=[("ng_trajectory", gap) for gap in _gaps_of(trajectory)],
    )


def projectors(*, check_templates: bool = False, build: int | None = None) -> list[Projector]:
    return [ObservationsProjector(check_templates=check_templates, build=build)]
