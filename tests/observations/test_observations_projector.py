"""The projector on its own: redacted events (payload None) and events it must ignore."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, func, select

from ledger.app.areas import schema_metadata
from ledger.areas.captures.events import CAPTURE_CLEARED, MODEL_CALL_CAPTURED
from ledger.areas.observations.events import OBSERVATIONS_RECORDED, RESULT_RECORDED
from ledger.areas.observations.projection import ObservationsProjector
from ledger.areas.observations.tables import observation_records
from ledger.log.records import StoredEvent


def event(
    seq: int, kind: str, payload: dict[str, Any] | None, rollout_id: str | None = "r"
) -> StoredEvent:
    return StoredEvent(
        seq=seq,
        recorded_at=datetime(2026, 11, 29, tzinfo=UTC),
        kind=kind,
        schema_version=1,
        rollout_id=rollout_id,
        generation=0,
        idempotency_key=None,
        payload=payload,
        payload_sha256="0" * 64,
        hash="0" * 64,
    )


@pytest.mark.parametrize(
    "kind", [MODEL_CALL_CAPTURED, OBSERVATIONS_RECORDED, RESULT_RECORDED, CAPTURE_CLEARED]
)
def test_redacted_events_leave_a_consistent_record(tmp_path: Path, kind: str) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'p.db'}")
    schema_metadata().create_all(engine)
    projector = ObservationsProjector()
    assert projector.handles(kind)
    with engine.begin() as conn:
        projector.apply(conn, event(1, kind, None))
        projector.flush(conn)
        row = conn.execute(select(observation_records.c.bundle, observation_records.c.result)).one()
        assert (row.bundle, row.result) == (None, None)
        # A later real bundle still projects (the record is rebuilt when the command ends).
        bundle = {"source": "a", "records": [], "gaps": []}
        projector.apply(conn, event(2, OBSERVATIONS_RECORDED, {"bundle": bundle}))
        projector.flush(conn)
        count = conn.execute(select(func.count()).select_from(observation_records)).scalar_one()
        assert count == 1
    engine.dispose()


def test_events_without_a_rollout_or_of_other_kinds_are_ignored(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'p.db'}")
    schema_metadata().create_all(engine)
    projector = ObservationsProjector()
    assert not projector.handles("ledger.row_recorded")
    with engine.begin() as conn:
        projector.apply(conn, event(1, RESULT_RECORDED, {"task_id": "t"}, rollout_id=None))
        projector.flush(conn)
        assert conn.execute(select(func.count()).select_from(observation_records)).scalar_one() == 0
    engine.dispose()


def test_a_failed_command_leaves_no_deferred_rebuild(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'p.db'}")
    schema_metadata().create_all(engine)
    projector = ObservationsProjector()
    bundle = {"source": "a", "records": [], "gaps": []}
    with engine.begin() as conn:
        projector.apply(conn, event(1, OBSERVATIONS_RECORDED, {"bundle": bundle}))
        projector.discard()
        projector.flush(conn)
        assert conn.execute(select(func.count()).select_from(observation_records)).scalar_one() == 0
    engine.dispose()
