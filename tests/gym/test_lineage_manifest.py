"""Gym's manifest construction (contract §3.4, §3.5), case by case, without a database."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from ledger.gym.lineage import (
    INVALID_MANIFEST_ROW,
    LEDGER_ROW_MISSING_CHAIN_HASH,
    LEDGER_ROW_MISSING_RESPONSE_ID,
    CallRecord,
    ManifestFailure,
    RolloutManifest,
    build_manifest,
    manifest_json,
)
from tests.lineage.rows import committed_row, failure_row, manifest_record


def failures_of(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(f.model_call_id, f.reason) for f in build_manifest("r1", rows).failures]


def test_rows_in_order_become_records_and_failures() -> None:
    root = committed_row("r1", "c1")
    child = committed_row("r1", "c3", parent=root)
    manifest = build_manifest("r1", [root, failure_row("c2"), child])
    body = manifest_json(manifest)
    assert body == {
        "schema_version": 2,
        "rollout_id": "r1",
        "records": [manifest_record(root), manifest_record(child)],
        "failures": [
            {"schema_version": 2, "model_call_id": "c2", "reason": "worker_capture_failed"}
        ],
    }
    # Wire order of keys is Gym's (its example reply in §3.9).
    assert list(body) == ["schema_version", "rollout_id", "records", "failures"]
    assert list(body["records"][0])[:4] == [
        "schema_version",
        "digest_version",
        "extras_digest_version",
        "model_call_id",
    ]


def test_digest_comes_from_staging_digest_not_the_row_digest() -> None:
    row = committed_row("r1", "c1")
    record = build_manifest("r1", [row]).records[0]
    assert record.digest == row["staging_digest"] != row["digest"]


def test_empty_rows_give_an_empty_manifest() -> None:
    assert manifest_json(build_manifest("r9", [])) == {
        "schema_version": 2,
        "rollout_id": "r9",
        "records": [],
        "failures": [],
    }


@pytest.mark.parametrize("value", [None, ""])
def test_missing_or_empty_response_id_is_a_failure(value: str | None) -> None:
    assert failures_of([committed_row("r1", "c1", response_id=value)]) == [
        ("c1", LEDGER_ROW_MISSING_RESPONSE_ID)
    ]


def test_absent_response_id_key_is_a_failure() -> None:
    row = committed_row("r1", "c1")
    del row["response_id"]
    assert failures_of([row]) == [("c1", LEDGER_ROW_MISSING_RESPONSE_ID)]


@pytest.mark.parametrize("column", ["chain_hash", "cumulative_hash"])
def test_missing_chain_or_cumulative_hash_is_a_failure(column: str) -> None:
    assert failures_of([{**committed_row("r1", "c1"), column: None}]) == [
        ("c1", LEDGER_ROW_MISSING_CHAIN_HASH)
    ]
    row = committed_row("r1", "c1")
    del row[column]
    assert failures_of([row]) == [("c1", LEDGER_ROW_MISSING_CHAIN_HASH)]


def test_response_id_is_checked_before_the_chain_hash() -> None:
    row = committed_row("r1", "c1", response_id=None, chain_hash=None)
    assert failures_of([row]) == [("c1", LEDGER_ROW_MISSING_RESPONSE_ID)]


@pytest.mark.parametrize(
    "overrides",
    [
        {"delta_len": 0, "cum_len": 0},
        {"cum_len": 999},
        {"mode": "token_in"},  # a root must be text
        {"prev_len": 5, "cum_len": 15},  # a root has prev_len 0
        {"staging_digest": "not-hex"},
        {"extras_digest": "A" * 64},
        {"mode": "sideways"},
        {"weight_version": -1},
        {"admitted_at": "yesterday"},
        {"fingerprint_version": -2},
    ],
)
def test_other_invalid_committed_rows_become_invalid_manifest_row(
    overrides: dict[str, Any],
) -> None:
    # `invalid_manifest_row` is INFERRED (contract §3.10): Gym has no such code; the route must
    # fail closed per row instead of crashing.
    assert failures_of([committed_row("r1", "c1", **overrides)]) == [("c1", INVALID_MANIFEST_ROW)]


def test_child_rules() -> None:
    root = committed_row("r1", "c1")
    assert failures_of([committed_row("r1", "c2", parent=root, mode="text")]) == [
        ("c2", INVALID_MANIFEST_ROW)
    ]
    assert failures_of([committed_row("r1", "c2", parent=root, prev_len=0, cum_len=10)]) == [
        ("c2", INVALID_MANIFEST_ROW)
    ]
    assert failures_of([root, committed_row("r1", "c2", parent=root)]) == []


def test_rows_without_custody_columns_are_ignored() -> None:
    lineage_only = {
        "model_call_id": "c0",
        "fingerprint": "f",
        "context_len": 1,
        "context_digest": "d",
        "digest": "d",
    }
    manifest = build_manifest("r1", [lineage_only, committed_row("r1", "c1")])
    assert [r.model_call_id for r in manifest.records] == ["c1"]
    assert manifest.failures == []


def test_missing_fingerprint_version_is_zero_and_empty_fingerprints_are_null() -> None:
    row = committed_row(
        "r1", "c1", fingerprint_version=None, output_fingerprint="", continuation_fingerprint=""
    )
    record = build_manifest("r1", [row]).records[0]
    assert record.fingerprint_version == 0
    assert record.output_fingerprint is None and record.continuation_fingerprint is None
    del row["fingerprint_version"]
    assert build_manifest("r1", [row]).records[0].fingerprint_version == 0


def test_manifest_never_contains_token_arrays() -> None:
    body = json.dumps(manifest_json(build_manifest("r1", [committed_row("r1", "c1")])))
    assert "token_ids" not in body and "staging_chain" not in body


def test_record_is_rebuilt_losslessly() -> None:
    row = committed_row(
        "r1", "c1", output_fingerprint="0f" * 32, continuation_fingerprint="cf" * 32
    )
    record = build_manifest("r1", [row]).records[0]
    assert record.model_dump(mode="json") == manifest_record(row)
    assert CallRecord.model_validate(record.model_dump(mode="json")) == record


def test_a_fingerprint_that_is_not_a_digest_is_an_invalid_row() -> None:
    # Gym 0.7.0's CallRecord types both fingerprints as 64-hex digests.
    row = committed_row("r1", "c1", output_fingerprint="of")
    assert failures_of([row]) == [("c1", INVALID_MANIFEST_ROW)]


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (ManifestFailure, {"model_call_id": "c", "reason": "x", "schema_version": 1}),
        (ManifestFailure, {"model_call_id": "", "reason": "x"}),
        (ManifestFailure, {"model_call_id": "c", "reason": "x", "extra": 1}),
        (RolloutManifest, {"rollout_id": "r1", "schema_version": 3}),
        (RolloutManifest, {"rollout_id": "r1", "records": [], "failures": [], "x": 1}),
    ],
)
def test_wire_models_refuse_other_versions_and_extra_keys(
    model: type[ManifestFailure | RolloutManifest], body: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(body)


def test_call_record_refuses_other_digest_versions_and_non_finite_floats() -> None:
    good = manifest_record(committed_row("r1", "c1"))
    CallRecord.model_validate(good)
    for key, value in (
        ("digest_version", 1),
        ("extras_digest_version", 2),
        ("schema_version", 1),
        ("admitted_at", float("nan")),
        ("admitted_at", float("inf")),
        ("prev_len", True),
    ):
        with pytest.raises(ValidationError):
            CallRecord.model_validate({**good, key: value})
