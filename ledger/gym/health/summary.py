"""The run: the duplicate-identity pass, the task checks, ``quality_summary.json`` and
``rollout_verdicts.jsonl``, as Gym 0.7.0 writes them."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ledger.gym.health import catalogue as c
from ledger.gym.health.evaluate import RolloutDigest, Verdict
from ledger.gym.health.findings import Finding, task_subject
from ledger.log.canonical import is_plain_json

QUALITY_SUMMARY_FILENAME = "quality_summary.json"
ROLLOUT_VERDICTS_FILENAME = "rollout_verdicts.jsonl"


def mark_duplicates(digests: list[RolloutDigest], ignored: Collection[str]) -> list[RolloutDigest]:
    """Every copy of a (stage, task, rollout) identity held by two or more records is unhealthy."""
    if c.ROLLOUT_DUPLICATE_IDENTITY in ignored:
        return digests
    counts = Counter((d.stage_index, d.task_index, d.rollout_index) for d in digests)
    return [
        d.with_duplicate(n)
        if (n := counts[(d.stage_index, d.task_index, d.rollout_index)]) > 1
        else d
        for d in digests
    ]


@dataclass(frozen=True)
class Repeat:
    """One rollout index of a task; its copies (stages, duplicates) collapsed."""

    verdict: Verdict
    policy_calls_observed: bool
    successful_model_calls: int


def _repeats(copies_by_rollout: dict[Any, list[RolloutDigest]]) -> list[Repeat]:
    repeats = []
    for copies in copies_by_rollout.values():
        verdicts = {copy.verdict for copy in copies}
        repeats.append(
            Repeat(
                verdict=verdicts.pop() if len(verdicts) == 1 else "unobserved",
                policy_calls_observed=all(copy.policy_calls_observed for copy in copies),
                successful_model_calls=max(copy.successful_model_calls for copy in copies),
            )
        )
    return repeats


def _empty_coverage(checks: Sequence[str]) -> dict[str, dict[str, int]]:
    return {check: {"evaluated": 0, "unobserved": 0, "ignored": 0} for check in checks}


def task_findings(
    task_index: Any,
    repeats: list[Repeat],
    ignored: Collection[str],
    coverage: dict[str, dict[str, int]],
) -> list[Finding]:
    """The task checks for one task; counts each in ``coverage``."""
    findings = []
    subject = task_subject(task_index)
    if c.TASK_CONSISTENTLY_UNHEALTHY in ignored:
        coverage[c.TASK_CONSISTENTLY_UNHEALTHY]["ignored"] += 1
    else:
        computable = [r for r in repeats if r.verdict != "unobserved"]
        if len(computable) >= 2:
            coverage[c.TASK_CONSISTENTLY_UNHEALTHY]["evaluated"] += 1
            if all(r.verdict == "unhealthy" for r in computable):
                detail = {"computable_repeats": len(computable)}
                findings.append(Finding(c.TASK_CONSISTENTLY_UNHEALTHY, subject, detail))
        else:
            coverage[c.TASK_CONSISTENTLY_UNHEALTHY]["unobserved"] += 1
    if c.TASK_NO_SUCCESSFUL_MODEL_CALLS in ignored:
        coverage[c.TASK_NO_SUCCESSFUL_MODEL_CALLS]["ignored"] += 1
    elif repeats and all(r.policy_calls_observed for r in repeats):
        coverage[c.TASK_NO_SUCCESSFUL_MODEL_CALLS]["evaluated"] += 1
        if not any(r.successful_model_calls for r in repeats):
            detail = {"repeats": len(repeats)}
            findings.append(Finding(c.TASK_NO_SUCCESSFUL_MODEL_CALLS, subject, detail))
    else:
        coverage[c.TASK_NO_SUCCESSFUL_MODEL_CALLS]["unobserved"] += 1
    return findings


def task_order(value: Any) -> tuple[bool, str]:
    return (isinstance(value, str), str(value))


def quality_summary(digests: Sequence[RolloutDigest], ignored: Collection[str]) -> dict[str, Any]:
    """``quality_summary.json`` for digests already through ``mark_duplicates``, in input order."""
    by_task: dict[Any, dict[Any, list[RolloutDigest]]] = {}
    for digest in digests:
        by_task.setdefault(digest.task_index, {}).setdefault(digest.rollout_index, []).append(
            digest
        )
    repeats = {task: _repeats(copies) for task, copies in by_task.items()}
    task_coverage = _empty_coverage(c.TASK_CHECKS)
    flags = {task: task_findings(task, r, ignored, task_coverage) for task, r in repeats.items()}

    coverage = _empty_coverage(c.ALL_CHECKS)
    issues: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    for digest in digests:
        unobserved = set(digest.unobserved)
        for check in c.ROLLOUT_CHECKS:
            if check in ignored:
                coverage[check]["ignored"] += 1
            else:
                coverage[check]["unobserved" if check in unobserved else "evaluated"] += 1
        issues.update(finding.check for finding in digest.findings)
        verdicts[digest.verdict] += 1
        by_status.update(digest.errors_by_status)
    coverage.update(task_coverage)
    issues.update(finding.check for found in flags.values() for finding in found)

    tasks: dict[str, Any] = {}
    for task in sorted(repeats, key=task_order):
        counted = Counter(r.verdict for r in repeats[task])
        tasks[str(task)] = {
            "repeats": len(repeats[task]),
            "healthy": counted["healthy"],
            "unhealthy": counted["unhealthy"],
            "unobserved": counted["unobserved"],
            "flags": [finding.check for finding in flags[task]],
        }
    return {
        "run": {
            "ignored_checks": sorted(ignored),
            "artifacts": {
                "records": len(digests),
                "captures": sum(d.capture_observed for d in digests),
                "coverage": coverage,
            },
            "verdicts": {key: verdicts[key] for key in ("healthy", "unhealthy", "unobserved")},
            "issues": {check: issues[check] for check in c.ALL_CHECKS},
            "stats": {
                "model_call_errors": {
                    "total": sum(d.model_call_errors for d in digests),
                    "by_status": dict(sorted(by_status.items())),
                    "rollouts_affected": sum(bool(d.model_call_errors) for d in digests),
                    "ended_on_error": sum(d.ended_on_error for d in digests),
                },
                "duplicated_calls": {
                    "replayed": sum(d.duplicated_calls for d in digests),
                    "rollouts": sum(bool(d.duplicated_calls) for d in digests),
                },
                "tokens": {
                    "prompt": sum(d.transcript_prompt_tokens for d in digests),
                    "completion": sum(d.transcript_completion_tokens for d in digests),
                    "capture_prompt": sum(d.capture_prompt_tokens for d in digests),
                    "capture_completion": sum(d.capture_completion_tokens for d in digests),
                },
            },
        },
        "tasks": tasks,
    }


def sort_part(value: Any) -> tuple[int, Any]:
    # bool is an int here, as in Gym's sort.
    return (0, value) if isinstance(value, int) else (1, str(value))


def verdict_order(digests: Iterable[RolloutDigest]) -> list[RolloutDigest]:
    return sorted(
        digests,
        key=lambda d: (
            sort_part(d.task_index),
            sort_part(d.rollout_index),
            sort_part(d.stage_index),
        ),
    )


def summary_bytes(summary: dict[str, Any]) -> bytes:
    """``quality_summary.json``: two-space indent, UTF-8, no trailing newline, the bytes of
    ``json.dumps(summary, indent=2, ensure_ascii=False)``. orjson writes those same bytes for
    plain JSON (``is_plain_json``: no float it spells otherwise, no big int, str keys), which a
    summary of counts is; the standard library's indenting encoder is pure Python and several
    times slower on a large summary (docs/benchmarks.md)."""
    if is_plain_json(summary):
        with contextlib.suppress(orjson.JSONEncodeError):  # a lone surrogate: stdlib says so
            return orjson.dumps(summary, option=orjson.OPT_INDENT_2)
    return json.dumps(summary, indent=2, ensure_ascii=False).encode()


def verdict_line(digest: RolloutDigest) -> bytes:
    return (json.dumps(digest.line(), separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def verdict_lines(digests: Iterable[RolloutDigest]) -> Iterator[bytes]:
    """``rollout_verdicts.jsonl``, sorted by (task, rollout, stage)."""
    for digest in verdict_order(digests):
        yield verdict_line(digest)
