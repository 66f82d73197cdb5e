"""Rollouts of one task for the compare page, written through a real server's HTTP API.

``cmp-0`` reads a file and patches it. ``cmp-1`` reads the same file (its tool call id is
another: ids do not count) and gives up: the transcripts first differ at call #1, the reply
(message 2 of the turn, after the tool result). ``cmp-2``'s first call is a 429: the first
difference is call #0, message 3 (a failure where ``cmp-0`` replied). ``cmp-3`` is ``cmp-0``
again with other ids, tokens and times: no difference. ``cmp-0-a1`` retries ``cmp-0`` and has
one call more.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.viewer_data import T0, exchange

TASK = "swe-verified/compare-42"
SYSTEM = {"role": "system", "content": "You fix bugs."}
QUESTION = {"role": "user", "content": "Fix the failing test in a.py."}
FILE = "def f():\n    return 1  # <script>window.__pwned = 4</script>"
ROLLOUTS = ("cmp-0", "cmp-1", "cmp-2", "cmp-3", "cmp-0-a1")
RESOLVED = {"cmp-0": True, "cmp-1": False, "cmp-2": False, "cmp-3": True, "cmp-0-a1": True}


def _reply(text: str, tool_id: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_id is not None:
        message["tool_calls"] = [
            {
                "id": tool_id,
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
            }
        ]
    return message


def _call(
    rollout_id: str,
    n: int,
    messages: list[dict[str, Any]],
    reply: dict[str, Any] | None,
    *,
    status: int = 200,
    tokens: int = 100,
) -> dict[str, Any]:
    start = T0 + 10 * n + (3 if rollout_id.endswith("3") else 0)
    body = exchange(f"{rollout_id}-m{n}", start, start + 1.5 + n, status_code=status)
    body["request"] = {"model": "m-chat", "messages": list(messages)}
    if reply is not None:
        body["response"]["choices"][0]["message"] = reply
        body["response"]["usage"]["prompt_tokens"] = tokens
    if status == 429:
        body["error_category"] = "rate_limited"
        body["response"] = {"error": {"message": "Too many requests", "type": "rate_limit"}}
    return body


def attempt(rollout_id: str) -> list[dict[str, Any]]:
    """The rollout's calls (see the module doc)."""
    tool_id = {"cmp-1": "call_other"}.get(rollout_id, f"call_{rollout_id}")
    history = [SYSTEM, QUESTION]
    if rollout_id == "cmp-2":
        return [_call(rollout_id, 0, history, None, status=429)]
    first = _reply("Reading a.py first.", tool_id)
    calls = [_call(rollout_id, 0, history, first, tokens=100 + len(rollout_id))]
    history = [*history, first, {"role": "tool", "tool_call_id": tool_id, "content": FILE}]
    final = "I give up." if rollout_id == "cmp-1" else "Patched: f returns 2."
    calls.append(_call(rollout_id, 1, history, _reply(final, None)))
    if rollout_id == "cmp-0-a1":
        history = [*history, _reply(final, None), {"role": "user", "content": "Run the tests."}]
        calls.append(_call(rollout_id, 2, history, _reply("All green.", None)))
    return calls


def compare_posts() -> list[tuple[str, dict[str, Any]]]:
    """Every POST (path, body) that writes the run, in order."""
    posts: list[tuple[str, dict[str, Any]]] = []
    for rollout_id in ROLLOUTS:
        posts.extend((f"/v1/rollouts/{rollout_id}/model-calls", b) for b in attempt(rollout_id))
        result = {"task_id": TASK, "resolved": RESOLVED[rollout_id]}
        posts.append((f"/v1/rollouts/{rollout_id}/result", result))
    return posts


def write_compare_run(http: httpx.Client) -> None:
    for path, body in compare_posts():
        http.post(path, json=body).raise_for_status()
