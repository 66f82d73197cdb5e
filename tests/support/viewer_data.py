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


# Hostile text for the transcript: markup, an attribute breaker, an RTL override, and (in one
# dialect) a line of a million characters.
HOSTILE = '<script>window.__pwned = 2</script>"><img src=x onerror="window.__pwned=3">'
RTL = "invoice_\u202egnp.exe"
HUGE_LINE = "A" * 1_000_000
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"
    "rkJggg=="
)


def _timed(model_call_id: str, dialect: str, n: int) -> dict[str, Any]:
    return {
        "model_call_id": model_call_id,
        "dialect": dialect,
        "model_ref": MODEL_REF,
        "started_at": T0 + 10 * n,
        "completed_at": T0 + 10 * n + 1.5,
        "latency_ms": 1500.0,
        "latency_ttft_ms": 200.0,
        "status_code": 200,
        "error_category": None,
    }


def chat_dialogue(rollout_id: str) -> list[dict[str, Any]]:
    """Two chat calls: a tool call, then its result (hostile) and the final answer."""
    system = {"role": "system", "content": "You are terse."}
    user = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in the file?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
        ],
    }
    reply = {
        "role": "assistant",
        "content": None,
        "reasoning_content": "I should read the file first.",
        "tool_calls": [
            {
                "id": "call_read",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.txt", "lines": 3}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_read", "content": f"{HOSTILE}\n{RTL}"}
    answer = {"role": "assistant", "content": "The file holds markup and a renamed exe."}

    def usage(prompt: int) -> dict[str, Any]:
        return {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20}

    first = {
        **_timed(f"{rollout_id}-0", "chat", 0),
        "request": {"model": "m-chat", "messages": [system, user]},
        "response": {
            "id": "chat-0",
            "object": "chat.completion",
            "model": "m-chat",
            "choices": [{"index": 0, "message": reply, "finish_reason": "tool_calls"}],
            "usage": usage(111),
        },
    }
    second = {
        **_timed(f"{rollout_id}-1", "chat", 1),
        "request": {"model": "m-chat", "messages": [system, user, reply, result]},
        "response": {
            "id": "chat-1",
            "object": "chat.completion",
            "model": "m-chat",
            "choices": [{"index": 0, "message": answer, "finish_reason": "stop"}],
            "usage": usage(222),
        },
    }
    return [first, second]


def responses_dialogue(rollout_id: str) -> list[dict[str, Any]]:
    """Two Responses calls: reasoning and a function call, then its output and the answer."""
    user = {"role": "user", "content": [{"type": "input_text", "text": "List the directory."}]}
    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Use ls."}]}
    call = {
        "type": "function_call",
        "call_id": "fc_ls",
        "name": "shell",
        "arguments": '{"cmd":"ls"}',
    }
    output = {"type": "function_call_output", "call_id": "fc_ls", "output": f"{RTL}\n{HUGE_LINE}"}
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Two files."}],
    }

    def usage(prompt: int) -> dict[str, Any]:
        return {"input_tokens": prompt, "output_tokens": 9, "total_tokens": prompt + 9}

    first = {
        **_timed(f"{rollout_id}-0", "responses", 0),
        "request": {"model": "m-resp", "instructions": "Be brief.", "input": [user]},
        "response": {
            "id": "resp-0",
            "model": "m-resp",
            "status": "completed",
            "output": [reasoning, call],
            "usage": usage(50),
        },
    }
    second = {
        **_timed(f"{rollout_id}-1", "responses", 1),
        "request": {
            "model": "m-resp",
            "instructions": "Be brief.",
            "input": [user, reasoning, call, output],
        },
        "response": {
            "id": "resp-1",
            "model": "m-resp",
            "status": "completed",
            "output": [answer],
            "usage": usage(60),
        },
    }
    return [first, second]


def messages_dialogue(rollout_id: str) -> list[dict[str, Any]]:
    """Two Anthropic calls: thinking and a tool_use, then the tool_result and the answer."""
    user = {"role": "user", "content": "Run the tests."}
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "pytest it is."},
        {"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"cmd": "pytest -q"}},
    ]
    reply = {
        "role": "assistant",
        "content": blocks,
    }
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "tu_1", "content": HOSTILE, "is_error": True}
        ],
    }

    def message(n: int, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
        return {
            "id": f"msg-{n}",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": content,
            "stop_reason": stop,
            "usage": {"input_tokens": 70 + n, "output_tokens": 7},
        }

    first = {
        **_timed(f"{rollout_id}-0", "messages", 0),
        "request": {"model": "claude", "system": "You run tests.", "messages": [user]},
        "response": message(0, blocks, "tool_use"),
    }
    second = {
        **_timed(f"{rollout_id}-1", "messages", 1),
        "request": {
            "model": "claude",
            "system": "You run tests.",
            "messages": [user, reply, result],
        },
        "response": message(1, [{"type": "text", "text": "One test failed."}], "end_turn"),
    }
    return [first, second]


DIALOGUES = {
    "talk-chat": chat_dialogue,
    "talk-responses": responses_dialogue,
    "talk-messages": messages_dialogue,
}


def write_dialogues(http: httpx.Client) -> None:
    for rollout_id, dialogue in DIALOGUES.items():
        for body in dialogue(rollout_id):
            http.post(f"/v1/rollouts/{rollout_id}/model-calls", json=body).raise_for_status()
