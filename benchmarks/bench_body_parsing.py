"""Request-body parsing: the one parser (orjson + the checks orjson does not make: depth,
duplicate keys, 64-bit integers) beside bare ``orjson.loads`` and the standard library's
``json.loads`` (what the routes used before), measured in the same run on the same bodies.

Usage: scripts/bench body_parsing [--quick]
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable
from typing import Any

import orjson

from ledger.app.http.json_body import parse_json

DESCRIPTION = "body parser (orjson + duplicate-key/depth/int checks) vs orjson.loads vs json.loads"


def chat_exchange(index: int, turns: int) -> dict[str, Any]:
    messages = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: " + "word " * 60}
        for n in range(turns)
    ]
    return {
        "model_call_id": f"call-{index}",
        "dialect": "chat",
        "model_ref": {"type": "responses_api_models", "name": "policy"},
        "started_at": 1764400000.25,
        "completed_at": 1764400001.5,
        "latency_ms": 1250.5,
        "status_code": 200,
        "request": {"model": "m", "messages": messages, "temperature": 0.7},
        "response": {
            "id": f"chatcmpl-{index}",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok: done"}}],
            "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240},
        },
    }


def logprobs_exchange(tokens: int) -> dict[str, Any]:
    """A dense payload: per-token logprobs, many small objects."""
    content = [
        {
            "token": f"t{n}",
            "logprob": -0.25,
            "bytes": [116, 49],
            "top_logprobs": [{"token": "x", "logprob": -2.5, "bytes": [120]}],
        }
        for n in range(tokens)
    ]
    exchange = chat_exchange(0, 4)
    exchange["response"]["choices"][0]["logprobs"] = {"content": content}
    return exchange


def bodies(quick: bool) -> dict[str, bytes]:
    scale = 1 if quick else 4
    return {
        "one capture (8 turns)": json.dumps(chat_exchange(0, 8)).encode(),
        f"batch of {50 * scale} captures": json.dumps(
            {
                "items": [
                    {"rollout_id": "r1", "exchange": chat_exchange(n, 8)} for n in range(50 * scale)
                ]
            }
        ).encode(),
        f"logprobs, {2000 * scale} tokens": json.dumps(logprobs_exchange(2000 * scale)).encode(),
    }


def per_call_us(action: Callable[[], object], budget_s: float) -> float:
    calls = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < budget_s or calls < 3:
        action()
        calls += 1
    return elapsed / calls * 1e6


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench body_parsing")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    budget = 0.3 if args.quick else 2.0
    print(f"{'body':28} {'size':>9} {'json.loads':>11} {'orjson':>9} {'parser':>9} {'checks':>8}")
    for name, raw in bodies(args.quick).items():
        stdlib = per_call_us(functools.partial(json.loads, raw), budget)
        bare = per_call_us(functools.partial(orjson.loads, raw), budget)
        ours = per_call_us(functools.partial(parse_json, raw, max_depth=128), budget)
        print(
            f"{name:28} {len(raw) / 1024:7.0f} KiB {stdlib:9.0f}us {bare:7.0f}us {ours:7.0f}us"
            f" {ours - bare:6.0f}us"
        )
    print("(per body; 'checks' = parser - orjson: the depth, duplicate-key and integer pass)")
