"""Generated runs for the viewer tests, written through a real server's HTTP API.

One "rich" rollout has a root invocation and a subagent, model calls with known times (one
failed, one truncated, one whose response carries markup), tool calls (two in parallel), a
pending call, a gap, ledger rows; plus many small rollouts for filtering and paging.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from ledger.gym.lineage import CONTROL_ROUTE_PREFIX
from tests.lineage.rows import committed_row, failure_row
from tests.support.exchanges import MODEL_REF

T0 = 1764400000.0
MARKUP = "<script>window.__pwned = 1</script><b>bold?</b>"


def exchange(
    model_call_id: str,
    started: float,
    ended: float,
    *,
    text: str = "ok",
    status_code: int = 200,
    finish_reason: str = "stop",
    error_category: str | None = None,
) -> dict[str, Any]:
    response: dict[str, Any] = {
        "id": f"resp-{model_call_id}",
        "object": "chat.completion",
        "model": "m-chat",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 40},
            "completion_tokens_details": {"reasoning_tokens": 5},
        },
    }
    if status_code >= 400:
        response = {"error": {"message": "upstream failed", "type": "server_error"}}
    return {
        "model_call_id": model_call_id,
        "dialect": "chat",
        "model_ref": MODEL_REF,
        "started_at": started,
        "completed_at": ended,
        "latency_ms": (ended - started) * 1000,
        "latency_ttft_ms": 50.0,
        "status_code": status_code,
        "error_category": error_category,
        "request": {"model": "m-chat", "messages": [{"role": "user", "content": "question"}]},
        "response": response,
    }


@dataclass
class RichRollout:
    rollout_id: str = "rich-0"
    # (model_call_id, start offset s, end offset s), in capture order
    calls: list[tuple[str, float, float]] = field(
        default_factory=lambda: [
            ("c0", 0.0, 2.0),
            ("c1", 2.5, 3.5),
            ("c2", 4.0, 8.0),
            ("c3", 8.5, 9.0),
        ]
    )
    # (tool_call_id, invocation, start, end)
    tools: list[tuple[str, str, float, float]] = field(
        default_factory=lambda: [
            ("t0", "root", 2.0, 2.5),
            ("t1", "sub", 3.5, 4.0),
            ("t2", "sub", 3.5, 3.8),
        ]
    )


def control_token(data_dir: Any) -> str:
    return str((data_dir / "control-token").read_text().strip())


def write_rich(http: httpx.Client, rich: RichRollout) -> None:
    rid = rich.rollout_id
    for i, (call_id, start, end) in enumerate(rich.calls):
        options: dict[str, Any] = {}
        if i == 1:
            options = {"status_code": 500, "error_category": "upstream_5xx"}
        elif i == 2:
            options = {"finish_reason": "length", "text": MARKUP}
        body = exchange(call_id, T0 + start, T0 + end, **options)
        http.post(f"/v1/rollouts/{rid}/model-calls", json=body).raise_for_status()
    http.post(
        f"/v1/rollouts/{rid}/model-calls/pending", json={"model_call_id": "c-late"}
    ).raise_for_status()
    records: list[dict[str, Any]] = [
        {
            "kind": "agent_invocation",
            "invocation_id": "root",
            "status": "completed",
            "model_calls": [{"model_call_id": "c0"}, {"model_call_id": "c1"}],
        },
        {
            "kind": "agent_invocation",
            "invocation_id": "sub",
            "parent_invocation_id": "root",
            "spawned_by_tool_call_id": "t0",
            "status": "failed",
            "error_type": "subagent_error",
            "model_calls": [{"model_call_id": "c2"}, {"model_call_id": "c3"}],
        },
    ]
    for tool_id, invocation, start, end in rich.tools:
        records.append(
            {
                "kind": "tool_call",
                "invocation_id": invocation,
                "tool_call_id": tool_id,
                "tool_name": f"tool-{tool_id}",
                "started_at": T0 + start,
                "completed_at": T0 + end,
                "status": "failed" if tool_id == "t2" else "completed",
            }
        )
    bundle = {
        "source": "test-harness",
        "records": records,
        "gaps": [{"code": "sandbox_observation_unavailable", "invocation_id": "sub"}],
    }
    http.post(f"/v1/rollouts/{rid}/observations", json=bundle).raise_for_status()
    http.post(
        f"/v1/rollouts/{rid}/result", json={"task_id": "task-rich", "resolved": True}
    ).raise_for_status()
    root = committed_row(rid, "c0")
    for row in (root, failure_row("c1"), committed_row(rid, "c2", parent=root)):
        http.post(f"/v1/rollouts/{rid}/ledger/rows", json=row).raise_for_status()


def write_small(http: httpx.Client, rollout_id: str, calls: int) -> None:
    for i in range(calls):
        body = exchange(f"{rollout_id}-m{i}", T0 + i, T0 + i + 0.5)
        http.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body).raise_for_status()


def retire(http: httpx.Client, token: str, rollout_ids: list[str]) -> None:
    http.post(
        f"{CONTROL_ROUTE_PREFIX}/rollouts/retire",
        json={"rollout_ids": rollout_ids},
        headers={"Authorization": f"Bearer {token}"},
    ).raise_for_status()
