"""The "Joined Example" of Gym's Rollout Evidence page (reference 001), reproduced exactly.

Fed the same capture, observations and collector result, the record carries the same values
(the page leaves optional fields out, so every field it shows is compared).
"""

from __future__ import annotations

import json
from typing import Any

from ledger.gym.record import RolloutEvidence, enrich_record
from ledger.gym.result import RolloutResult
from tests.support.observations import assert_shows, capture_call

EXAMPLE_RECORD: dict[str, Any] = json.loads(
    """
{
  "ng_model_call_capture": {
    "rollout_id": "0-0",
    "metrics": {"num_calls": 1, "tokens_in": 12, "tokens_out": 8},
    "calls": [{"model_call_id": "call-1", "tokens_in": 12, "tokens_out": 8}]
  },
  "ng_agent_observations": {
    "source": "example_agent",
    "records": [
      {
        "kind": "agent_invocation",
        "invocation_id": "root",
        "model_calls": [{"model_call_id": "call-1"}],
        "conversation": [
          {"type": "function_call", "call_id": "tool-1", "name": "lookup", "arguments": "{}"},
          {"type": "function_call_output", "call_id": "tool-1", "output": "42"}
        ]
      },
      {
        "kind": "tool_call", "invocation_id": "root", "tool_call_id": "tool-1",
        "tool_name": "lookup", "duration_ms": 200, "timing_source": "harness",
        "status": "completed"
      }
    ],
    "gaps": []
  },
  "ng_trajectory": {
    "schema_version": "1.0",
    "task_id": "task-7",
    "rollout_id": "0-0",
    "invocations": [{
      "kind": "agent_invocation",
      "invocation_id": "root",
      "model_calls": [{"model_call_id": "call-1"}],
      "conversation": [
        {"type": "function_call", "call_id": "tool-1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "tool-1", "output": "42"}
      ]
    }],
    "turns": [],
    "model_calls": [{
      "model_call_id": "call-1",
      "request": {"input": "Look up the answer"},
      "response": {"output": [
        {"type": "function_call", "call_id": "tool-1", "name": "lookup", "arguments": "{}"}
      ]},
      "token_stats": {"prompt_tokens": 12, "completion_tokens": 8}
    }],
    "tool_calls": [{
      "kind": "tool_call", "invocation_id": "root", "tool_call_id": "tool-1",
      "tool_name": "lookup", "duration_ms": 200, "timing_source": "harness",
      "status": "completed", "output": "42"
    }],
    "gaps": [{"code": "turns_unavailable"}]
  },
  "ng_perf": {
    "num_turns": 1, "num_tool_calls": 1, "token_observability_coverage": 1.0,
    "prompt_tokens": 12, "completion_tokens": 8, "total_latency_ms": 910
  }
}
"""
)

# What the model server captured: the one call, with the payloads the trajectory shows.
EXAMPLE_CALL = capture_call(
    model_call_id="call-1",
    call_index=0,
    tokens_in=12,
    tokens_out=8,
    tokens_total=20,
    request={"input": "Look up the answer"},
    response={
        "output": [
            {"type": "function_call", "call_id": "tool-1", "name": "lookup", "arguments": "{}"}
        ]
    },
)
# The collector's view of the finished attempt: row identity and measured latency.
EXAMPLE_RESULT = {
    "task_id": "task-7",
    "_ng_task_index": 0,
    "_ng_rollout_index": 0,
    "latency_ms": 910,
}


def example_evidence() -> RolloutEvidence:
    return RolloutEvidence(
        rollout_id="0-0",
        capture={
            "rollout_id": "0-0",
            "metrics": {
                "tokens_in": 12,
                "tokens_out": 8,
                "tokens_reasoning": None,
                "tokens_total": 20,
                "cached_tokens": None,
                "latency_total_ms": None,
                "num_calls": 1,
            },
            "calls": [EXAMPLE_CALL],
        },
        observations=EXAMPLE_RECORD["ng_agent_observations"],
        result=RolloutResult.model_validate(EXAMPLE_RESULT),
    )


def test_joined_example_is_reproduced() -> None:
    record = enrich_record(example_evidence())

    assert_shows(record, EXAMPLE_RECORD)


def test_joined_example_has_exactly_the_shown_gaps_and_perf_keys() -> None:
    record = enrich_record(example_evidence())

    assert record["ng_trajectory"]["gaps"] == [
        {"code": "turns_unavailable", "invocation_id": None, "detail": None}
    ]
    assert record["ng_agent_observations"]["gaps"] == []
    assert "gaps" not in record["ng_model_call_capture"]
    # ng_perf is exactly the page's object, key order included.
    assert list(record["ng_perf"].items()) == list(EXAMPLE_RECORD["ng_perf"].items())


def test_joined_example_strips_capture_payloads_after_projection() -> None:
    record = enrich_record(example_evidence())

    call = record["ng_model_call_capture"]["calls"][0]
    for key in ("request", "response", "request_raw", "response_raw"):
        assert key not in call
    assert call["tokens_total"] == 20
    assert record["ng_trajectory"]["model_calls"][0]["request"] == EXAMPLE_CALL["request"]


def test_joined_example_is_stable_when_enriched_twice() -> None:
    assert enrich_record(example_evidence()) == enrich_record(example_evidence())
