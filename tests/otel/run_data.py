"""The run the OTLP tests export, written through a real server's HTTP API: the viewer's rich
rollout (a root invocation and a subagent, a failed call, tools in parallel, a gap), one
rollout per capture dialect, and a generated Gym run labelled with a run label; and what a
collector should hold of it, counted from the ledger's own records."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.health_run import generate_run
from tests.support.viewer_data import DIALOGUES, RichRollout, write_dialogues, write_rich

RUN_LABEL = "otel-run"


def write_run(http: httpx.Client, *, generated: int, prefix: str = "gen-") -> list[str]:
    """Write the run; its rollout ids."""
    write_rich(http, RichRollout())
    write_dialogues(http)
    ids = ["rich-0", *DIALOGUES]
    ids += write_generated(http, generated, prefix=prefix)
    return ids


def write_generated(http: httpx.Client, rollouts: int, *, prefix: str, seed: int = 12) -> list[str]:
    ids = []
    for planned in generate_run(rollouts, seed=seed, prefix=prefix):
        for path, body in planned.posts:
            http.post(f"{path}?run={RUN_LABEL}", json=body).raise_for_status()
        ids.append(planned.rollout_id)
    return ids


def expected_spans(http: httpx.Client, rollout_ids: list[str]) -> int:
    """A span per rollout, invocation, captured call and tool call, from each stored record."""
    total = 0
    for rollout_id in rollout_ids:
        response = http.get(f"/v1/rollouts/{rollout_id}/record")
        if response.status_code == 404:
            continue
        response.raise_for_status()
        record: dict[str, Any] = response.json()
        calls = record.get("ng_model_call_capture", {}).get("calls", [])
        trajectory = record.get("ng_trajectory")
        if isinstance(trajectory, dict):
            invocations = trajectory.get("invocations", [])
            tools = trajectory.get("tool_calls", [])
        else:
            observed = record.get("ng_agent_observations", {}).get("records", [])
            invocations = [r for r in observed if r.get("kind") == "agent_invocation"]
            tools = [r for r in observed if r.get("kind") == "tool_call"]
        total += 1 + len(invocations) + len(calls) + len(tools)
    return total
