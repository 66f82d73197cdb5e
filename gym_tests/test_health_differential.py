"""Gym 0.7.0's own ``run_health_checks`` and ``compute_perf_summary`` on the ledger's
``ledger export`` output agree with the ledger's ``ledger health`` and ``ledger perf-summary``:
the same two files byte for byte, the same perf block. Hundreds of generated rollouts written
through the HTTP API of a real ``ledger serve``, on each backend."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from nemo_gym.reward_profile import compute_perf_summary
from nemo_gym.rollout_health import run_health_checks

from gym_tests.support import PROJECT_PYTHON_ENV
from tests.support.health_run import PlannedRollout, generate_run, interleaved_posts
from tests.support.server import ServerProcess

ROLLOUTS = 320
FILES = ("quality_summary.json", "rollout_verdicts.jsonl")


def ledger_cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """The project's CLI, from the project's environment, on the server's database."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(LEDGER_DATA_DIR=str(server.data_dir), LEDGER_DATABASE_URL=server.database_url)
    done = subprocess.run(
        [os.environ[PROJECT_PYTHON_ENV], "-m", "ledger", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"ledger {' '.join(args)} failed:\n{done.stderr}"
    return done


def write_run(server: ServerProcess, planned: list[PlannedRollout]) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        for path, body in interleaved_posts(planned, seed=5):
            answer = http.post(path, json=body)
            assert answer.status_code in (200, 201), f"{path}: {answer.text}"


def ledger_id(line: bytes) -> str:
    """The ledger's rollout id of an exported record (the capture names it; else the
    trajectory; else the result's indexes, as the ledger derives ids)."""
    record = json.loads(line)
    capture = record.get("ng_model_call_capture")
    if isinstance(capture, dict) and capture.get("rollout_id"):
        return str(capture["rollout_id"])
    trajectory = record.get("ng_trajectory")
    if isinstance(trajectory, dict):
        return str(trajectory["rollout_id"])
    attempt = record.get("_ng_attempt_index") or 0
    base = (
        record.get("_ng_rollout_id") or f"{record['_ng_task_index']}-{record['_ng_rollout_index']}"
    )
    return f"{base}-a{attempt}" if attempt else str(base)


def gym_files(
    export: Path, out: Path, *, keep: set[str] | None = None, ignored: Sequence[str] = ()
) -> dict[str, bytes]:
    source = export
    if keep is not None:
        source = out.parent / f"{out.name}-input.jsonl"
        with export.open("rb") as lines, source.open("wb") as kept:
            for line in lines:
                if ledger_id(line) in keep:
                    kept.write(line)
    run_health_checks(source, output_dir=out, workers=1, ignored_checks=ignored)
    return {name: (out / name).read_bytes() for name in FILES}


def ledger_files(server: ServerProcess, out: Path, *args: str) -> dict[str, bytes]:
    ledger_cli(server, "health", *args, "--output-dir", str(out))
    return {name: (out / name).read_bytes() for name in FILES}


def gym_perf(export: Path, keep: set[str] | None = None) -> dict[str, Any] | None:
    rows = [
        json.loads(line)
        for line in export.read_bytes().splitlines()
        if keep is None or ledger_id(line) in keep
    ]
    documents = [row["ng_perf"] for row in rows if isinstance(row.get("ng_perf"), dict)]
    summary: dict[str, Any] | None = compute_perf_summary(documents, total_rollouts=len(rows))
    return summary


def ledger_perf(server: ServerProcess, *args: str) -> Any:
    return json.loads(ledger_cli(server, "perf-summary", *args).stdout)


def same_perf(ours: Any, theirs: dict[str, Any] | None) -> None:
    assert ours == theirs
    if theirs is not None:
        # Same keys in the same order, ints where Gym has ints.
        assert [(k, type(v)) for k, v in ours.items()] == [(k, type(v)) for k, v in theirs.items()]


def wait_for_health_findings(server: ServerProcess, timeout: float = 120.0) -> None:
    """Until the server's health follower has a current row for every record (its gauge), so
    the ledger's answers below come from ``health_findings`` (the freshness rule's fallback,
    checking on read, is what the other legs of the suite see most)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        metrics = httpx.get(f"{server.base_url}/metrics", timeout=10).text
        counts: dict[str, float] = {
            line.split()[0]: float(line.split()[1])
            for line in metrics.splitlines()
            if line.startswith(("ledger_rollouts_by_verdict", "ledger_health_findings_behind"))
        }
        if counts.get("ledger_health_findings_behind_rollouts") == 0 and sum(counts.values()) > 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"the health follower did not catch up in {timeout} s")


def test_gym_and_the_ledger_agree_on_a_generated_run(
    ledger_server: ServerProcess, tmp_path: Path
) -> None:
    """One run per backend (writing it is the slow part), every comparison on it."""
    server = ledger_server
    planned = generate_run(ROLLOUTS, seed=12)
    write_run(server, planned)
    wait_for_health_findings(server)
    export = tmp_path / "rollouts.jsonl"
    ledger_cli(server, "export", "--output", str(export))
    latest = {p.rollout_id for p in planned if not p.superseded}
    superseded = [p for p in planned if p.superseded]
    assert superseded, "the generated run has attempts"

    # Every attempt: Gym over the whole export.
    theirs = gym_files(export, tmp_path / "gym-all")
    assert ledger_files(server, tmp_path / "ledger-all", "--attempts", "all") == theirs
    summary = json.loads(theirs["quality_summary.json"])
    # The run reaches every check the ledger's records can express (record_unreadable needs
    # an unparseable line or trajectory, which no record the ledger writes has; see
    # docs/contract.md). The results carry the agent's response usage, so the token-count
    # check runs: most rollouts match, some are one token off.
    unreachable = {"record_unreadable"}
    coverage = summary["run"]["artifacts"]["coverage"]
    assert coverage["rollout_token_count_mismatch"]["evaluated"] > 0
    issues = summary["run"]["issues"]
    assert {check for check, count in issues.items() if count == 0} == unreachable
    assert summary["run"]["artifacts"]["records"] >= ROLLOUTS

    # The latest attempt of each (task, rollout): Gym over those records.
    theirs = gym_files(export, tmp_path / "gym-latest", keep=latest)
    assert ledger_files(server, tmp_path / "ledger-latest") == theirs
    answer = ledger_cli(server, "health", "--json")
    assert json.loads(answer.stdout) == json.loads(theirs["quality_summary.json"])
    table = ledger_cli(server, "health").stdout
    assert f"{len(superseded)} superseded attempts left out" in table

    # Ignored checks (comma-separated and repeated), then an id glob.
    ignored = ["rollout_token_count_mismatch", "model_call_failed", "task_consistently_unhealthy"]
    theirs = gym_files(export, tmp_path / "gym-ignored", ignored=ignored)
    ours = ledger_files(
        server,
        tmp_path / "ledger-ignored",
        "--attempts",
        "all",
        "--ignore",
        ",".join(ignored[:2]),
        "--ignore",
        ignored[2],
    )
    assert ours == theirs
    healthy = json.loads(theirs["quality_summary.json"])["run"]["verdicts"]["healthy"]
    assert healthy > 0  # with the token check ignored, clean rollouts are healthy
    chosen = {p.rollout_id for p in planned if fnmatch.fnmatchcase(p.rollout_id, "1*")}
    theirs = gym_files(export, tmp_path / "gym-glob", keep=chosen)
    assert ledger_files(server, tmp_path / "ledger-glob", "1*", "--attempts", "all") == theirs

    # Gym's perf_summary block.
    same_perf(ledger_perf(server, "--attempts", "all"), gym_perf(export))
    same_perf(ledger_perf(server), gym_perf(export, latest))
    chosen = {p.rollout_id for p in planned if fnmatch.fnmatchcase(p.rollout_id, "2?-*")}
    same_perf(ledger_perf(server, "2?-*", "--attempts", "all"), gym_perf(export, chosen))
    assert ledger_perf(server, "nothing-*") is None
