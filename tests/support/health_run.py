"""Generated runs for the health tests: rollouts written through the ledger's HTTP API
(captured model calls, an observation bundle, the collector's result with a producer
trajectory) that between them set off every rollout and task check the ledger's records can
express. Standard library only: the Gym leg (gym_tests/) imports it too.

Each rollout draws its defects at random from a seeded generator, so a run is reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

POLICY = {"type": "responses_api_models", "name": "policy"}
JUDGE = {"type": "responses_api_models", "name": "judge"}
# The check a generated run makes raise on purpose (a ``runaway_chat`` rollout): a test that
# checks such a run says so with ``pytest.mark.health_check_errors(RAISING_CHECK)``.
RAISING_CHECK = "model_call_runaway_generation"


@dataclass
class PlannedRollout:
    rollout_id: str
    posts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # A later attempt of the same (task, rollout) is in the run.
    superseded: bool = False

    def post(self, what: str, body: dict[str, Any]) -> None:
        self.posts.append((f"/v1/rollouts/{self.rollout_id}/{what}", body))


def _text_response(
    response_id: str, *, prompt: int | None, completion: int | None
) -> dict[str, Any]:
    response: dict[str, Any] = {
        "id": response_id,
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "an answer"}],
            }
        ],
    }
    if prompt is not None or completion is not None:
        usage: dict[str, Any] = {}
        if prompt is not None:
            usage["input_tokens"] = prompt
        if completion is not None:
            usage["output_tokens"] = completion
        response["usage"] = usage
    return response


class _Rollout:
    """One rollout's calls, turns and gaps while it is being drawn."""

    def __init__(self, rng: random.Random, rollout_id: str, task: int, repeat: int) -> None:
        self.rng = rng
        self.rollout_id = rollout_id
        self.task = task
        self.repeat = repeat
        self.exchanges: list[dict[str, Any]] = []
        self.turn_refs: list[list[dict[str, Any]]] = []
        self.invocation_refs: list[dict[str, Any]] = []
        self.gaps: list[dict[str, Any]] = []
        self.clock = 1_764_400_000.0 + rng.randint(0, 10_000)

    def call(
        self,
        *,
        status: int | None = 200,
        error: str | None = None,
        prompt: int | None = None,
        completion: int | None = None,
        response: Any = "text",
        model: dict[str, str] = POLICY,
        with_id: bool = True,
        response_id: str | None = None,
        started: bool = True,
        in_turn: bool = True,
    ) -> dict[str, Any]:
        index = len(self.exchanges)
        call_id = f"{self.rollout_id}-c{index}" if with_id else None
        rid = response_id or f"resp-{self.rollout_id}-{index}"
        prompt = self.rng.randint(5, 400) if prompt is None else prompt
        completion = self.rng.randint(1, 200) if completion is None else completion
        if response == "text":
            response = _text_response(rid, prompt=prompt, completion=completion)
        self.clock += self.rng.random() * 3
        exchange: dict[str, Any] = {
            "model_call_id": call_id,
            "dialect": "responses",
            "model_ref": model,
            "started_at": self.clock if started else None,
            "completed_at": self.clock + 0.5 if started else None,
            "latency_ms": 500.0,
            "status_code": status,
            "error_category": error,
            "request": {"input": f"question {index}"},
            "response": response,
        }
        self.exchanges.append(exchange)
        ref: dict[str, Any] = (
            {"model_call_id": call_id} if call_id else {"model_ref": model, "response_id": rid}
        )
        if in_turn:
            self.turn_refs.append([ref])
        else:
            self.invocation_refs.append(ref)
        return exchange


def _draw(rng: random.Random, r: _Rollout) -> dict[str, Any]:
    """Draw the rollout's calls; returns how its turns look."""
    shape: dict[str, Any] = {"hollow": False, "no_turns": False, "ghost": False}
    kind = rng.choice(
        [
            "healthy",
            "healthy",
            "healthy",
            "failed_last",
            "failed_recovered",
            "judge_failed",
            "zero_tokens",
            "missing_tokens",
            "runaway",
            "runaway_chat",
            "hollow",
            "no_turns",
            "ghost_ref",
            "duplicated_calls",
            "contradiction_gap",
            "unordered_failure",
            "invocation_only",
            "failed_by_status_text",
        ]
    )
    shape["kind"] = kind
    for _ in range(rng.randint(0, 2)):
        r.call()
    if kind == "failed_last":
        r.call(
            status=rng.choice([429, 500, 503]),
            error=rng.choice([None, "rate_limited"]),
            response=None,
        )
    elif kind == "failed_recovered":
        r.call(status=500, error="server_error", response=None)
        r.call()
    elif kind == "judge_failed":
        r.call()
        r.call(status=503, error="unavailable", response=None, model=JUDGE, in_turn=False)
    elif kind == "zero_tokens":
        r.call(completion=0)
    elif kind == "missing_tokens":
        r.call(response={"id": f"resp-{r.rollout_id}-m", "status": "completed", "output": []})
    elif kind == "runaway":
        r.call(
            response={
                "id": f"resp-{r.rollout_id}-x",
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [],
                "usage": {"input_tokens": 50, "output_tokens": 4096},
            }
        )
    elif kind == "runaway_chat":
        # A chat response whose message is a bare string: Gym's runaway check raises on it
        # (RAISING_CHECK).
        r.call(
            response={
                "id": f"resp-{r.rollout_id}-y",
                "choices": [{"index": 0, "finish_reason": "length", "message": "cut off"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 4096},
            }
        )
    elif kind == "hollow":
        r.call()
        shape["hollow"] = True
    elif kind == "no_turns":
        r.call()
        shape["no_turns"] = True
    elif kind == "ghost_ref":
        r.call()
        shape["ghost"] = True
    elif kind == "duplicated_calls":
        shared = f"resp-{r.rollout_id}-dup"
        r.call(with_id=False, response_id=shared)
        r.call(with_id=False, response_id=shared, in_turn=False)
    elif kind == "contradiction_gap":
        r.call()
        code = rng.choice(
            [
                "model_call_reference_unmatched",
                "model_call_reference_ambiguous",
                "model_call_reference_conflict",
            ]
        )
        r.gaps.append({"code": code, "invocation_id": "root", "detail": f"call:{r.rollout_id}-z"})
    elif kind == "unordered_failure":
        r.call(started=False)
        r.call(status=500, response=None)
    elif kind == "invocation_only":
        r.call(in_turn=False)
    elif kind == "failed_by_status_text":
        r.call(
            status=200,
            response={"id": f"resp-{r.rollout_id}-f", "status": "failed", "output": []},
        )
    if rng.random() < 0.05:
        r.gaps.append({"code": rng.choice(["model_call_capture_incomplete", "turns_unavailable"])})
    return shape


def _trajectory(
    r: _Rollout, shape: dict[str, Any], task_id: str, rollout_id: str
) -> dict[str, Any]:
    turns = []
    if not shape["no_turns"]:
        for number, refs in enumerate(r.turn_refs, start=1):
            refs = list(refs)
            if shape["ghost"] and number == 1:
                refs.append({"model_call_id": f"{r.rollout_id}-ghost"})
            answer: Any = "an answer"
            if shape["hollow"] and number == len(r.turn_refs):
                answer = None
            elif r.rng.random() < 0.2:
                answer = [
                    {
                        "type": "function_call",
                        "call_id": f"t{number}",
                        "name": "f",
                        "arguments": "{}",
                    }
                ]
            turns.append(
                {
                    "invocation_id": "root",
                    "task_id": task_id,
                    "rollout_id": rollout_id,
                    "turn_no": number,
                    "timestamp": float(number),
                    "answer": answer,
                    "step_count": number,
                    "model_calls": refs,
                }
            )
    return {
        "task_id": task_id,
        "rollout_id": rollout_id,
        "turns": turns,
        "gaps": r.gaps,
    }


def _agent_usage(r: _Rollout, rng: random.Random) -> dict[str, int] | None:
    """The agent response's usage (Gym: the sum over the responses that finished): mostly the
    captured calls' sums, sometimes one token off, sometimes absent. Drawn from a generator of
    its own so the rest of the run is what it was before usage was reported."""
    draw = rng.random()
    if draw < 0.1:
        return None
    prompt = completion = 0
    for exchange in r.exchanges:
        response = exchange.get("response")
        usage = response.get("usage") if isinstance(response, dict) else None
        if isinstance(usage, dict):
            prompt += usage.get("input_tokens", usage.get("prompt_tokens", 0)) or 0
            completion += usage.get("output_tokens", usage.get("completion_tokens", 0)) or 0
    if draw > 0.85:
        completion += 1
    return {"input_tokens": prompt, "output_tokens": completion}


def _plan_one(
    rng: random.Random, rollout_id: str, task: int, repeat: int, attempt: int, *, always_fail: bool
) -> PlannedRollout:
    r = _Rollout(rng, rollout_id, task, repeat)
    if always_fail:
        r.call(status=429, error="rate_limited", response=None)
        shape: dict[str, Any] = {"hollow": False, "no_turns": False, "ghost": False, "kind": "fail"}
    else:
        shape = _draw(rng, r)
    planned = PlannedRollout(rollout_id)
    for exchange in r.exchanges:
        planned.post("model-calls", exchange)
    evidence = rng.random()
    if evidence < 0.9:
        invocation: dict[str, Any] = {
            "kind": "agent_invocation",
            "invocation_id": "root",
            "model_calls": [ref for refs in r.turn_refs for ref in refs] + r.invocation_refs,
            "conversation": [{"type": "message", "role": "user", "content": "q"}],
        }
        planned.post("observations", {"source": "generated", "records": [invocation], "gaps": []})
    if evidence < 0.97:
        task_id = f"task-{task}"
        derived = f"{task}-{repeat}" + (f"-a{attempt}" if attempt else "")
        result: dict[str, Any] = {
            "task_id": task_id,
            "_ng_task_index": task,
            "_ng_rollout_index": repeat,
            "resolved": rng.random() < 0.5,
        }
        if attempt:
            result["_ng_attempt_index"] = attempt
        if rng.random() < 0.9:
            result["latency_ms"] = rng.choice(
                [rng.randint(100, 90_000), round(rng.random() * 9e4, 3)]
            )
        if rng.random() < 0.93:
            result["ng_trajectory"] = _trajectory(r, shape, task_id, derived)
        usage = _agent_usage(r, random.Random(rollout_id))
        if usage is not None:
            result["response"] = {"id": f"agent-{rollout_id}", "usage": usage}
        planned.post("result", result)
    return planned


def generate_run(rollouts: int, *, seed: int = 12, prefix: str = "") -> list[PlannedRollout]:
    """About ``rollouts`` rollouts in tasks of 1-4 repeats; some tasks always fail, some
    rollouts have a second attempt, and a few records claim another record's identity."""
    rng = random.Random(seed)
    planned: list[PlannedRollout] = []
    task = 0
    while len(planned) < rollouts:
        repeats = rng.randint(1, 4)
        always_fail = rng.random() < 0.08
        for repeat in range(repeats):
            base = f"{prefix}{task}-{repeat}"
            planned.append(_plan_one(rng, base, task, repeat, 0, always_fail=always_fail))
            if rng.random() < 0.06:
                planned[-1].superseded = True
                planned.append(
                    _plan_one(rng, f"{base}-a1", task, repeat, 1, always_fail=always_fail)
                )
        if rng.random() < 0.03:
            # Another record claiming the identity of this task's first repeat.
            copy = _plan_one(rng, f"{prefix}{task}-0-copy", task, 0, 0, always_fail=False)
            for path, body in copy.posts:
                if path.endswith("/result"):
                    body["_ng_rollout_id"] = f"{prefix}{task}-0-copy"
                    if "ng_trajectory" in body:
                        body["ng_trajectory"]["rollout_id"] = f"{prefix}{task}-0-copy"
                        for turn in body["ng_trajectory"]["turns"]:
                            turn["rollout_id"] = f"{prefix}{task}-0-copy"
            planned.append(copy)
        task += 1
    return planned


def interleaved_posts(
    planned: list[PlannedRollout], *, seed: int = 0
) -> list[tuple[str, dict[str, Any]]]:
    """Every post of the run, rollouts interleaved as a live run writes them (each rollout's
    own posts keep their order)."""
    rng = random.Random(seed)
    queues = [list(reversed(p.posts)) for p in planned if p.posts]
    posts = []
    while queues:
        index = rng.randrange(len(queues))
        posts.append(queues[index].pop())
        if not queues[index]:
            queues[index] = queues[-1]
            queues.pop()
    return posts
