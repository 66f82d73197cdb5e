"""The OTLP export against a real Arize Phoenix server: a generated run exported once and read
back through Phoenix's REST API (counts, a rollout's span tree with a subagent, token
attributes, an error span, no duplicate on a second export). Run by scripts/test-phoenix."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.otel.commands import ledger_export, upgraded
from tests.otel.phoenix import PhoenixProcess
from tests.otel.run_data import RUN_LABEL, expected_spans, write_generated, write_run
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.phoenix, pytest.mark.slow]


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[PhoenixProcess]:
    server = PhoenixProcess(tmp_path / "phoenix").start()
    try:
        yield server
    finally:
        server.stop()


def by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {span["name"]: span for span in spans}


def test_one_shot_export_reads_back_from_phoenix(tmp_path: Path, phoenix: PhoenixProcess) -> None:
    data_dir = tmp_path / "ledger"
    data_dir.mkdir()
    with (
        ServerProcess(data_dir=data_dir, database_url=upgraded(data_dir)) as ledger,
        httpx.Client(base_url=ledger.base_url, timeout=60) as http,
    ):
        rollout_ids = write_run(http, generated=40)
        expected = expected_spans(http, rollout_ids)
        expected_run = expected_spans(http, rollout_ids[4:])  # the generated, labelled part
    assert expected > 150

    done = ledger_export(data_dir, "--otlp", phoenix.base_url)
    assert done.returncode == 0, done.stderr
    assert f"spans sent: {expected}, refused: 0" in done.stderr
    spans = phoenix.settled_spans()
    assert len(spans) == expected

    # The rich rollout: rollout -> root agent -> subagent, each call and tool under its agent.
    root = next(s for s in spans if s["name"] == "rollout rich-0")
    trace = [s for s in spans if s["context"]["trace_id"] == root["context"]["trace_id"]]
    assert len(trace) == 1 + 2 + 4 + 3
    named = by_name(trace)
    agent, sub = named["invoke_agent root"], named["invoke_agent sub"]
    assert root["parent_id"] is None
    assert agent["parent_id"] == root["context"]["span_id"]
    assert sub["parent_id"] == agent["context"]["span_id"]
    assert agent["span_kind"] == sub["span_kind"] == "AGENT"
    assert sub["status_code"] == "ERROR"
    assert sub["attributes"]["error.type"] == "subagent_error"
    calls = [s for s in trace if s["span_kind"] == "LLM"]
    under = {s["attributes"]["ledger.model_call_id"]: s["parent_id"] for s in calls}
    assert under == {
        "c0": agent["context"]["span_id"],
        "c1": agent["context"]["span_id"],
        "c2": sub["context"]["span_id"],
        "c3": sub["context"]["span_id"],
    }
    tools = {s["attributes"]["gen_ai.tool.call.id"]: s for s in trace if s["span_kind"] == "TOOL"}
    assert tools["t0"]["parent_id"] == agent["context"]["span_id"]
    assert tools["t2"]["parent_id"] == sub["context"]["span_id"]
    assert tools["t2"]["status_code"] == "ERROR"

    # Tokens, as both conventions spell them; the failed call is an error span.
    first = next(s for s in calls if s["attributes"]["ledger.model_call_id"] == "c0")
    assert first["attributes"]["gen_ai.usage.input_tokens"] == 100
    assert first["attributes"]["llm.token_count.prompt"] == 100
    assert first["attributes"]["gen_ai.usage.output_tokens"] == 20
    assert first["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
    assert first["attributes"]["gen_ai.request.model"] == "m-chat"
    failed = next(s for s in calls if s["attributes"]["ledger.model_call_id"] == "c1")
    assert failed["status_code"] == "ERROR"
    assert failed["attributes"]["error.type"] == "upstream_5xx"
    assert failed["attributes"]["http.response.status_code"] == 500
    # Timestamps are the captures' own (T0 = 1764400000.0 in the viewer's data).
    assert first["start_time"].startswith("2025-11-29T07:06:40")
    # Gaps are events of the rollout span; content is off by default.
    gap_codes = {e["attributes"]["ledger.gap.code"] for e in root["events"]}
    assert "sandbox_observation_unavailable" in gap_codes
    assert not any("input.value" in s["attributes"] for s in spans)

    # The run label and the health verdict ride on each rollout span of the generated run.
    labelled = [s for s in spans if s["attributes"].get("ledger.run") == RUN_LABEL]
    assert len(labelled) == len(rollout_ids) - 4
    verdicts = {s["attributes"]["ledger.health.verdict"] for s in labelled}
    assert verdicts <= {"healthy", "unhealthy", "unobserved"}
    assert "unhealthy" in verdicts

    # A second export of the same run: the same ids, so nothing is duplicated.
    again = ledger_export(data_dir, "--otlp", phoenix.base_url, "--run", RUN_LABEL, "--content")
    assert again.returncode == 0, again.stderr
    assert f"spans sent: {expected_run}, refused: 0" in again.stderr
    assert len(phoenix.settled_spans()) == expected


def metric(ledger: ServerProcess, name: str) -> float:
    """One sample of the ledger's /metrics (0 when absent)."""
    text = httpx.get(f"{ledger.base_url}/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.25)  # poll


def exported(ledger: ServerProcess) -> bool:
    return metric(ledger, "ledger_otlp_lag_rollouts") == 0


def checkpoint(data_dir: Path) -> int:
    with sqlite3.connect(f"file:{data_dir}/ledger.db?mode=ro", uri=True) as conn:
        row = conn.execute(
            "SELECT seq FROM mirror_checkpoints WHERE name = 'otlp-export'"
        ).fetchone()
    return 0 if row is None else int(row[0])


def newest_change(data_dir: Path) -> int:
    with sqlite3.connect(f"file:{data_dir}/ledger.db?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT max(last_seq) FROM observation_records").fetchone()[0])


def follower_env(phoenix: PhoenixProcess, **extra: str) -> dict[str, str]:
    return {
        "LEDGER_OTLP_ENDPOINT": phoenix.base_url,
        "LEDGER_OTLP_SETTLE_S": "0.2",
        **extra,
    }


def test_follower_survives_the_collector_going_away(
    tmp_path: Path, phoenix: PhoenixProcess
) -> None:
    data_dir = tmp_path / "ledger"
    data_dir.mkdir()
    url = upgraded(data_dir)
    env = follower_env(phoenix)
    with (
        ServerProcess(data_dir=data_dir, database_url=url, env=env) as ledger,
        httpx.Client(base_url=ledger.base_url, timeout=60) as http,
    ):
        before = write_run(http, generated=20, prefix="a-")
        expected_before = expected_spans(http, before)
        wait_until(lambda: exported(ledger), "the first part exported")
        assert len(phoenix.settled_spans()) == expected_before

        phoenix.stop()
        during = write_generated(http, 20, prefix="b-")
        expected_during = expected_spans(http, during)
        wait_until(lambda: metric(ledger, "ledger_otlp_requests_failed_total") > 0, "a failure")
        # The collector stays away for 30 s, the follower retrying all along.
        time.sleep(30)  # poll: the 30 s outage is the scenario, not a wait for a condition
        assert metric(ledger, "ledger_otlp_lag_rollouts") == len(during)
        assert metric(ledger, "ledger_otlp_export_failures_total") > 0

        phoenix.start()
        wait_until(lambda: exported(ledger), "the rest exported once the collector is back")
        # Each span was sent at least once (the export process reports its tally as it goes).
        total = expected_before + expected_during
        sent = 'ledger_otlp_spans_total{outcome="sent"}'
        wait_until(lambda: metric(ledger, sent) >= total, "the spans sent in /metrics")
    spans = phoenix.settled_spans()
    # Nothing lost, nothing twice: every span once, each rollout's trace whole.
    assert len(spans) == total
    roots = {s["attributes"]["ledger.rollout_id"] for s in spans if s["parent_id"] is None}
    assert roots == set(before) | set(during)


def test_follower_resumes_from_its_checkpoint_after_sigkill(
    tmp_path: Path, phoenix: PhoenixProcess
) -> None:
    data_dir = tmp_path / "ledger"
    data_dir.mkdir()
    url = upgraded(data_dir)
    with (
        ServerProcess(data_dir=data_dir, database_url=url) as ledger,
        httpx.Client(base_url=ledger.base_url, timeout=60) as http,
    ):
        rollout_ids = write_generated(http, 300, prefix="k-")
        expected = expected_spans(http, rollout_ids)
    final = newest_change(data_dir)

    # Small pages and batches: many checkpoints, so the kill lands between two of them.
    env = follower_env(phoenix, LEDGER_OTLP_PAGE_ROLLOUTS="10", LEDGER_OTLP_BATCH_SPANS="20")
    first = ServerProcess(data_dir=data_dir, database_url=url, env=env).start()
    try:
        deadline = time.monotonic() + 300
        while checkpoint(data_dir) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)  # poll
    finally:
        # The server and its export process both, as a crash of the machine's memory would.
        for pid in first.child_pids():
            os.kill(pid, signal.SIGKILL)
        first.kill()
    at_kill = checkpoint(data_dir)
    assert 0 < at_kill < final, (at_kill, final)

    with ServerProcess(data_dir=data_dir, database_url=url, env=env) as second:
        wait_until(lambda: exported(second), "the export finished after the restart")
        sent_after_restart = metric(second, 'ledger_otlp_spans_total{outcome="sent"}')
    assert checkpoint(data_dir) == final
    assert len(phoenix.settled_spans()) == expected
    # It resumed from the checkpoint: what was taken before it was not sent again.
    assert 0 < sent_after_restart < expected
