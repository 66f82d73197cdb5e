"""The wire models of recorded rows (contract §3.3): strict, extra keys forbidden."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from ledger.gym.lineage import (
    ROW_COLUMNS,
    CommittedRow,
    FailureRow,
    LedgerBatchRequest,
    LedgerRowBody,
    check_stored_row,
    removal_json,
    row_dict,
)
from tests.lineage.rows import committed_row, failure_row

BODY: TypeAdapter[CommittedRow | FailureRow] = TypeAdapter(LedgerRowBody)


def test_committed_row_round_trips_every_column() -> None:
    row = committed_row("r1", "c1")
    assert set(row) == set(ROW_COLUMNS)
    parsed = BODY.validate_python(row)
    assert isinstance(parsed, CommittedRow)
    assert row_dict(parsed) == row


def test_failure_row_is_exactly_two_keys() -> None:
    parsed = BODY.validate_python(failure_row("c2"))
    assert isinstance(parsed, FailureRow)
    assert row_dict(parsed) == {"failure_reason": "worker_capture_failed", "model_call_id": "c2"}
    with pytest.raises(ValidationError):
        BODY.validate_python({**failure_row("c2"), "staging_key": "r1/c2"})


def loc_of(row: dict[str, Any]) -> list[tuple[str | int, ...]]:
    with pytest.raises(ValidationError) as caught:
        BODY.validate_python(row)
    return [tuple(e["loc"]) for e in caught.value.errors()]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"surprise": 1}, "surprise"),
        ({"prev_len": -1}, "prev_len"),
        ({"delta_len": -5}, "delta_len"),
        ({"cum_len": "10"}, "cum_len"),
        ({"context_len": 1.0}, "context_len"),
        ({"weight_version": True}, "weight_version"),
        ({"admitted_at": float("nan")}, "admitted_at"),
        ({"admitted_at": float("inf")}, "admitted_at"),
        ({"staging_key": ""}, "staging_key"),
        ({"model_call_id": 7}, "model_call_id"),
        ({"staging_chain": "r1/c1"}, "staging_chain"),
        ({"response_id": 12}, "response_id"),
        ({"fingerprint_version": -1}, "fingerprint_version"),
    ],
)
def test_bad_committed_rows_name_the_field(overrides: dict[str, Any], field: str) -> None:
    locs = loc_of({**committed_row("r1", "c1"), **overrides})
    assert any(field in loc for loc in locs), locs


@pytest.mark.parametrize("column", ["staging_key", "prev_len", "fingerprint_version"])
def test_every_other_column_is_required(column: str) -> None:
    row = committed_row("r1", "c1")
    del row[column]
    assert any(column in loc for loc in loc_of(row))


@pytest.mark.parametrize("column", ["chain_hash", "cumulative_hash", "response_id"])
def test_an_older_gyms_row_may_lack_a_hash_or_response_id(column: str) -> None:
    row = committed_row("r1", "c1")
    del row[column]
    parsed = BODY.validate_python(row)
    assert isinstance(parsed, CommittedRow)
    assert row_dict(parsed) == row  # recorded as it came: the column stays absent
    assert column not in row_dict(parsed)


def test_stored_row_check_accepts_lineage_only_rows_and_refuses_unknown_columns() -> None:
    check_stored_row({"model_call_id": "c0", "fingerprint": "f"})
    check_stored_row(failure_row("c1"))
    with pytest.raises(ValueError, match="unknown ledger row column"):
        check_stored_row({"model_call_id": "c0", "tokens": [1, 2]})
    with pytest.raises(ValueError, match="model_call_id"):
        check_stored_row({"fingerprint": "f"})
    with pytest.raises(ValueError, match="fingerprint is longer than 1024"):
        check_stored_row({"model_call_id": "c0", "fingerprint": "f" * 1025})


def test_batch_request_bounds() -> None:
    assert LedgerBatchRequest.model_validate({"rollout_ids": ["a"]}).rollout_ids == ["a"]
    bodies: list[dict[str, object]] = [
        {"rollout_ids": []},
        {"rollout_ids": ["a"] * 4097},
        {"rollout_ids": ["a"], "force": True},
        {"rollout_ids": [1]},
        {"rollout_ids": "a"},
        {},
    ]
    for body in bodies:
        with pytest.raises(ValidationError):
            LedgerBatchRequest.model_validate(body)
    assert len(LedgerBatchRequest.model_validate({"rollout_ids": ["a"] * 4096}).rollout_ids) == 4096


def test_removal_reply_has_exactly_two_keys() -> None:
    assert removal_json(["r1"], ["r2"]) == {"removed": ["r1"], "absent": ["r2"]}
