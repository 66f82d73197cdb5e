"""A run's health: duplicates, task checks, ignored checks, the two files as Gym writes them."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from ledger.gym.health.catalogue import ALL_CHECKS, UnknownCheck, normalize_ignored_checks
from ledger.gym.health.run import HealthReport, check_facts, check_records, facts_from_files
from ledger.gym.health.summary import summary_bytes, verdict_lines
from tests.gym.health_records import model_call, record
from tests.support.json_values import generated


def lines_of(report: HealthReport) -> list[dict[str, Any]]:
    return [json.loads(line) for line in verdict_lines(report.digests)]


def test_verdict_is_unhealthy_over_unobserved_over_healthy() -> None:
    report = check_records(
        [
            record(0, 0, usage=(10, 5)),
            record(0, 1, calls=[model_call("c", completion=0)]),
            record(0, 2),  # no transcript usage: the token check lacks its input
        ]
    )
    assert [d.verdict for d in report.digests] == ["healthy", "unhealthy", "unobserved"]
    assert report.digests[2].unobserved == ("rollout_token_count_mismatch",)


def test_duplicate_identity_marks_every_copy_at_the_end() -> None:
    rec = record(4, 0, calls=[model_call("c", completion=0)])
    report = check_records([rec, rec, record(4, 0, stage_index=1)])
    first, second, staged = report.digests
    assert [f.check for f in first.findings] == [
        "model_call_zero_completion_tokens",
        "rollout_duplicate_identity",
    ]
    assert first.findings[-1].line() == {
        "check": "rollout_duplicate_identity",
        "detail": {"duplicate_count": 2},
    }
    assert second.verdict == "unhealthy"
    assert all(f.check != "rollout_duplicate_identity" for f in staged.findings)
    ignored = check_records([rec, rec], ["rollout_duplicate_identity"])
    assert all(f.check != "rollout_duplicate_identity" for d in ignored.digests for f in d.findings)


def test_task_consistently_unhealthy_needs_two_computable_repeats() -> None:
    bad: dict[str, Any] = {"calls": [model_call("c", completion=0)]}
    report = check_records(
        [record(1, 0, **bad), record(1, 1, **bad), record(2, 0, **bad), record(2, 1)]
    )
    tasks = report.summary["tasks"]
    assert tasks["1"]["flags"] == ["task_consistently_unhealthy"]
    assert tasks["2"] == {"repeats": 2, "healthy": 0, "unhealthy": 1, "unobserved": 1, "flags": []}
    coverage = report.summary["run"]["artifacts"]["coverage"]["task_consistently_unhealthy"]
    assert coverage == {"evaluated": 1, "unobserved": 1, "ignored": 0}
    assert report.summary["run"]["issues"]["task_consistently_unhealthy"] == 1


def test_task_no_successful_model_calls() -> None:
    failed: dict[str, Any] = {"calls": [model_call("c", status=429, error="rate_limited")]}
    report = check_records([record(5, 0, **failed), record(5, 1, **failed), record(6, 0)])
    assert report.summary["tasks"]["5"]["flags"] == [
        "task_consistently_unhealthy",
        "task_no_successful_model_calls",
    ]
    assert report.summary["tasks"]["6"]["flags"] == []
    coverage = report.summary["run"]["artifacts"]["coverage"]["task_no_successful_model_calls"]
    assert coverage == {"evaluated": 2, "unobserved": 0, "ignored": 0}
    # A repeat without policy-call bindings makes the task unobserved.
    unbound = check_records([record(7, 0, **failed), {"_ng_task_index": 7, "_ng_rollout_index": 1}])
    assert unbound.summary["run"]["artifacts"]["coverage"]["task_no_successful_model_calls"] == {
        "evaluated": 0,
        "unobserved": 1,
        "ignored": 0,
    }


def test_task_findings_do_not_change_rollout_verdicts() -> None:
    failed: dict[str, Any] = {
        "calls": [model_call("c", status=None, error="timeout")],
        "usage": (10, 5),
    }
    report = check_records([record(5, 0, **failed)])
    assert report.summary["tasks"]["5"]["flags"] == ["task_no_successful_model_calls"]
    assert [d.verdict for d in report.digests] == ["unhealthy"]  # for model_call_failed only


def test_ignored_checks_are_skipped_and_counted_as_ignored() -> None:
    rec = record(calls=[model_call("c", status=500)])
    report = check_records([rec, rec], "model_call_failed, rollout_ended_on_failed_model_call,")
    assert report.ignored == ("model_call_failed", "rollout_ended_on_failed_model_call")
    run = report.summary["run"]
    assert run["ignored_checks"] == ["model_call_failed", "rollout_ended_on_failed_model_call"]
    assert run["artifacts"]["coverage"]["model_call_failed"] == {
        "evaluated": 0,
        "unobserved": 0,
        "ignored": 2,
    }
    ignored_tasks = check_records([rec], ["task_consistently_unhealthy"])
    coverage = ignored_tasks.summary["run"]["artifacts"]["coverage"]
    assert coverage["task_consistently_unhealthy"] == {
        "evaluated": 0,
        "unobserved": 0,
        "ignored": 1,
    }


def test_normalize_ignored_checks() -> None:
    assert normalize_ignored_checks(" a_b ,,".replace("a_b", ALL_CHECKS[3])) == (ALL_CHECKS[3],)
    assert normalize_ignored_checks([ALL_CHECKS[0], ALL_CHECKS[0]]) == (ALL_CHECKS[0],)
    with pytest.raises(UnknownCheck, match="Unknown rollout health check\\(s\\): a, b"):
        normalize_ignored_checks(["b", "a", ALL_CHECKS[0]])


def test_unreadable_lines_and_blank_lines() -> None:
    good = json.dumps(record(0, 0, usage=(10, 5))).encode()
    facts = facts_from_files(
        [("runs/a.jsonl", [good + b"\n", b"\n", b"{not json\n", b"[1, 2]\n", b"NaN\n"])]
    )
    report = check_facts(facts)
    unreadable = report.digests[1]
    assert unreadable.task_index == "__unreadable_record__:input-0:line-3"
    assert unreadable.rollout_id == "__unreadable_record__:input-0:line-3-0"
    assert [f.line() for f in unreadable.findings] == [
        {
            "check": "record_unreadable",
            "locator": {"source_file": "runs/a.jsonl", "line": 3},
            "detail": {"reason": "rollout record is unreadable", "error": "JSONDecodeError"},
        }
    ]
    assert len(unreadable.unobserved) == 11
    assert report.digests[2].findings[0].detail["error"] == "ValueError"
    assert report.digests[3].findings[0].detail["error"] == "JSONDecodeError"
    assert report.summary["run"]["artifacts"]["records"] == 4


def test_verdict_lines_sort_and_key_order() -> None:
    report = check_records(
        [record(10, 0), record(2, 1, usage=(10, 5), stage_index=3), record(2, 0), record("b", 0)]
    )
    raw = b"".join(verdict_lines(report.digests))
    assert raw.endswith(b"\n") and raw.count(b"\n") == 4
    rows = lines_of(report)
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows] == [
        (2, 0),
        (2, 1),
        (10, 0),
        ("b", 0),
    ]
    assert list(rows[1]) == [
        "_ng_task_index",
        "_ng_rollout_index",
        "rollout_id",
        "verdict",
        "findings",
        "unobserved",
        "stage_index",
    ]
    assert "stage_index" not in rows[0]
    assert raw.split(b"\n")[1] == (
        b'{"_ng_task_index":2,"_ng_rollout_index":1,"rollout_id":"2-1","verdict":"healthy",'
        b'"findings":[],"unobserved":[],"stage_index":3}'
    )
    # Tasks in string order, strings last.
    assert list(report.summary["tasks"]) == ["10", "2", "b"]


def test_summary_serialisation_and_totals() -> None:
    report = check_records(
        [
            record(
                0, 0, calls=[model_call("a", status=500), model_call("b", status=503, started=2.0)]
            ),
            record(
                0,
                1,
                calls=[model_call(None, response_id="x"), model_call(None, response_id="x")],
                turns=[],
                usage=(7, 3),
            ),
            {"_ng_task_index": 1, "_ng_rollout_index": 0, "note": "ü"},
        ]
    )
    raw = summary_bytes(report.summary)
    assert not raw.endswith(b"\n")
    assert raw.startswith(b'{\n  "run": {\n    "ignored_checks": [],\n    "artifacts": {\n')
    assert json.loads(raw) == report.summary
    stats = report.summary["run"]["stats"]
    assert stats == {
        "model_call_errors": {
            "total": 2,
            "by_status": {"500": 1, "503": 1},
            "rollouts_affected": 1,
            "ended_on_error": 1,
        },
        "duplicated_calls": {"replayed": 1, "rollouts": 1},
        "tokens": {"prompt": 7, "completion": 3, "capture_prompt": 40, "capture_completion": 20},
    }
    assert report.summary["run"]["artifacts"]["captures"] == 2
    assert report.summary["run"]["verdicts"] == {"healthy": 0, "unhealthy": 2, "unobserved": 1}
    assert list(report.summary["run"]["issues"]) == list(ALL_CHECKS)


def test_summary_bytes_are_the_standard_librarys_indented_dump_whatever_the_values() -> None:
    # orjson writes a summary of counts; any value it would spell otherwise goes to stdlib.
    rng = random.Random(20261203)
    for _ in range(3000):
        value = {"run": generated(rng), "tasks": {"0": generated(rng)}}
        assert summary_bytes(value) == json.dumps(value, indent=2, ensure_ascii=False).encode()
    nan = {"run": {"x": float("nan")}, "tasks": {}}
    assert summary_bytes(nan) == b'{\n  "run": {\n    "x": NaN\n  },\n  "tasks": {}\n}'
    with pytest.raises(UnicodeEncodeError):  # as before: a lone surrogate is not UTF-8
        summary_bytes({"run": "\ud800", "tasks": {}})
