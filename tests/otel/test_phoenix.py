"""The OTLP export against a real Arize Phoenix server: a generated run exported once and read
back through Phoenix's REST API (counts, a rollout's span tree with a subagent, token
attributes, an error span, no duplicate on a second export). Run by scripts/test-phoenix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.otel.commands import ledger_export, upgraded
from tests.otel.phoenix import PhoenixProcess
from tests.otel.run_data import RUN_LABEL, expected_spans, write_run
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
    assert expected > 150

    done = ledger_export(data_dir, "--otlp", phoenix.base_url)
    assert done.returncode == 0, done.stderr
    assert f"spans sent: {expected}, refused: 0" in done.stderr
    spans = phoenix.wait_for_spans(expected)
    assert len(spans) == expected
    assert len({span["context"]["span_id"] for span in spans}) == expected

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
    assert len(phoenix.spans()) == expected
