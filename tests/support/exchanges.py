"""Realistic raw exchanges (Gym capture lines) for the three observed dialects."""

from __future__ import annotations

import uuid
from typing import Any

MODEL_REF = {"type": "responses_api_models", "name": "policy_model"}


def chat_exchange(
    *, model_call_id: str | None = None, prompt_tokens: int = 12, text: str = "hello"
) -> dict[str, Any]:
    return {
        "model_call_id": model_call_id or uuid.uuid4().hex,
        "dialect": "chat",
        "model_ref": MODEL_REF,
        "started_at": 1764400000.25,
        "completed_at": 1764400001.5,
        "latency_ms": 1250.5,
        "latency_ttft_ms": None,
        "status_code": 200,
        "error_category": None,
        "request": {"model": "m-chat", "messages": [{"role": "user", "content": text}]},
        "response": {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "m-chat",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": "hi",
                        "reasoning_content": "thinking",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": 5,
                "total_tokens": prompt_tokens + 5,
                "prompt_tokens_details": {"cached_tokens": 4},
            },
        },
    }


def responses_exchange(*, model_call_id: str | None = None) -> dict[str, Any]:
    return {
        "model_call_id": model_call_id or uuid.uuid4().hex,
        "dialect": "responses",
        "model_ref": MODEL_REF,
        "started_at": 1764400002.0,
        "completed_at": 1764400003.0,
        "latency_ms": 1000.0,
        "latency_ttft_ms": 120.25,
        "status_code": 200,
        "error_category": None,
        "request": {"model": "m-resp", "input": "q"},
        "response": {
            "id": "resp_1",
            "model": "m-resp",
            "status": "completed",
            "output": [
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "r1"}]},
                {"type": "function_call", "call_id": "fc_1", "name": "f", "arguments": "{}"},
            ],
            "usage": {
                "input_tokens": 30,
                "output_tokens": 10,
                "total_tokens": 40,
                "output_tokens_details": {"reasoning_tokens": 3},
            },
        },
        "client_session_id": "session-1",
    }


def messages_exchange(*, model_call_id: str | None = None) -> dict[str, Any]:
    return {
        "model_call_id": model_call_id or uuid.uuid4().hex,
        "dialect": "messages",
        "model_ref": None,
        "started_at": 1764400004.0,
        "completed_at": 1764400004.5,
        "latency_ms": 500.0,
        "latency_ttft_ms": None,
        "status_code": 200,
        "error_category": None,
        "request": {"model": "claude", "messages": []},
        "response": {
            "id": "msg_1",
            "type": "message",
            "model": "claude",
            "stop_reason": "end_turn",
            "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "ok"}],
            "usage": {
                "input_tokens": 7,
                "output_tokens": 2,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 20,
            },
        },
    }


def failed_exchange(*, model_call_id: str | None = None) -> dict[str, Any]:
    """A call that failed upstream: no usage, a raw body, a status category."""
    return {
        "model_call_id": model_call_id or uuid.uuid4().hex,
        "dialect": "chat",
        "model_ref": MODEL_REF,
        "started_at": 1764400005.0,
        "completed_at": 1764400005.1,
        "latency_ms": 100.0,
        "latency_ttft_ms": None,
        "status_code": 503,
        "error_category": "upstream_error",
        "request": {"model": "m-chat"},
        "response": None,
        "response_raw": "Service Unavailable",
    }
