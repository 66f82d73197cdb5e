"""Builders for enriched rollout records, as the health-check tests need them."""

from __future__ import annotations

from typing import Any

POLICY = {"type": "responses_api_models", "name": "policy"}
JUDGE = {"type": "responses_api_models", "name": "judge"}
TEXT_RESPONSE = {
    "output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}]
}


def model_call(
    call_id: str | None,
    *,
    status: int | None = 200,
    error: str | None = None,
    prompt: int | None = 10,
    completion: int | None = 5,
    started: float | None = 1.0,
    finish: str | None = "stop",
    response: Any = TEXT_RESPONSE,
    model_ref: dict[str, str] | None = POLICY,
    response_id: str | None = None,
    response_status: str | None = None,
) -> dict[str, Any]:
    return {
        "model_call_id": call_id,
        "started_at": started,
        "response": response,
        "response_metadata": {
            "response_id": response_id if response_id is not None else f"r-{call_id}",
            "model_ref": model_ref,
            "status_code": status,
            "error_category": error,
            "finish_reason": finish,
            "response_status": response_status,
        },
        "token_stats": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


def turn(
    rollout_id: str,
    turn_no: int,
    refs: list[Any],
    *,
    task_id: str = "0",
    answer: Any = "an answer",
    reasoning: Any = None,
) -> dict[str, Any]:
    return {
        "invocation_id": "inv",
        "task_id": task_id,
        "rollout_id": rollout_id,
        "turn_no": turn_no,
        "timestamp": 0.0,
        "answer": answer,
        "reasoning_content": reasoning,
        "step_count": 1,
        "model_calls": [{"model_call_id": r} if isinstance(r, str) else r for r in refs],
    }


def record(
    task: Any = 0,
    rollout: Any = 0,
    *,
    calls: list[dict[str, Any]] | None = None,
    turns: list[dict[str, Any]] | None = None,
    invocations: list[dict[str, Any]] | None = None,
    gaps: list[dict[str, Any]] | None = None,
    usage: tuple[Any, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One call ``c`` and one turn that owns it, unless told otherwise."""
    rollout_id = f"{task}-{rollout}"
    calls = [model_call("c")] if calls is None else calls
    if turns is None:
        turns = [
            turn(
                rollout_id,
                1,
                [str(c["model_call_id"]) for c in calls if c["model_call_id"]],
                task_id=str(task),
            )
        ]
    out: dict[str, Any] = {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "ng_trajectory": {
            "task_id": str(task),
            "rollout_id": rollout_id,
            "invocations": [{"invocation_id": "inv"}] if invocations is None else invocations,
            "turns": turns,
            "model_calls": calls,
            "gaps": gaps or [],
        },
    }
    if usage is not None:
        out["response"] = {"usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}
    out.update(extra)
    return out
