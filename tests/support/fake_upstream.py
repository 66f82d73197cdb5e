"""A fake model provider on loopback speaking OpenAI's and Anthropic's wire formats.

``python -m tests.support.fake_upstream --port N [--record FILE]``. Routes: ``/v1/responses``,
``/v1/chat/completions``, ``/v1/messages``, JSON or SSE (the request's ``stream``). The request's
``model`` picks the scenario (``SCENARIOS``); every answer is a pure function of the path and
the request (``plan_for``), so a test can compute exactly what was sent. ``--record`` appends
one JSON line per request (path, headers, body) before answering. ``x-fake-delay-ms`` delays
the answer (benchmarks).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.types import Receive, Scope, Send

from tests.support.readiness import answers

SCENARIOS = (
    "plain",
    "tools",
    "reasoning",
    "rate-limit",
    "server-error",
    "slow",
    "truncated",
    "stall",
    "cut",
    "large",
)
LARGE_TEXT_BYTES = 64 * 1024
TEXT_PIECES = ("Hello", " from", " the fake upstream.")
TOOL_ARGUMENT_PIECES = ('{"city": ', '"Paris"}')
THOUGHT = "Let me think."
SLOW_S = 30.0
STALL_LIMIT_S = 60.0


@dataclass(frozen=True)
class Plan:
    status: int
    content_type: str
    chunks: tuple[bytes, ...]
    # Stall after this many chunks (until the client goes), or cut the connection there.
    stall_after: int | None = None
    cut_after: int | None = None
    delay_s: float = 0.0

    def sent(self) -> bytes:
        """What the client receives, as far as the upstream sends it."""
        stop = self.stall_after if self.stall_after is not None else self.cut_after
        return b"".join(self.chunks[:stop])


def _json(status: int, body: dict[str, Any]) -> Plan:
    return Plan(status, "application/json", (json.dumps(body).encode(),))


def _sse(blocks: list[tuple[str | None, Any]]) -> tuple[bytes, ...]:
    chunks = []
    for event, data in blocks:
        text = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {event}\n" if event else ""
        chunks.append(f"{head}data: {text}\n\n".encode())
    return tuple(chunks)


def _usage(dialect: str, scenario: str) -> dict[str, Any]:
    cached = scenario == "reasoning"
    if dialect == "chat":
        usage: dict[str, Any] = {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}
        if cached:
            usage["prompt_tokens_details"] = {"cached_tokens": 8}
            usage["completion_tokens_details"] = {"reasoning_tokens": 4}
        return usage
    if dialect == "responses":
        return {
            "input_tokens": 12,
            "input_tokens_details": {"cached_tokens": 8 if cached else 0},
            "output_tokens": 6,
            "output_tokens_details": {"reasoning_tokens": 4 if cached else 0},
            "total_tokens": 18,
        }
    usage = {"input_tokens": 12, "output_tokens": 6}
    if cached:
        usage.update({"cache_creation_input_tokens": 3, "cache_read_input_tokens": 7})
    return usage


def _error(dialect: str, status: int) -> Plan:
    kind = "rate_limit_error" if status == 429 else "api_error"
    message = "slow down" if status == 429 else "the upstream failed"
    if dialect == "messages":
        return _json(status, {"type": "error", "error": {"type": kind, "message": message}})
    return _json(status, {"error": {"message": message, "type": kind, "code": None}})


# ---- chat completions -----------------------------------------------------------------------


def _chat_message(scenario: str) -> tuple[dict[str, Any], str]:
    if scenario == "tools":
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": "".join(TOOL_ARGUMENT_PIECES)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    message: dict[str, Any] = {"role": "assistant", "content": "".join(TEXT_PIECES)}
    if scenario == "reasoning":
        message["reasoning_content"] = THOUGHT
    return message, "stop"


def _chat(model: str, scenario: str, stream: bool) -> Plan:
    base = {"id": "chatcmpl-fake", "created": 1764400000, "model": model}
    message, finish = _chat_message(scenario)
    if not stream:
        choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        body = {**base, "object": "chat.completion", "choices": [choice]}
        return _json(200, {**body, "usage": _usage("chat", scenario)})

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return {**base, "object": "chat.completion.chunk", "choices": [choice]}

    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if scenario == "reasoning":
        deltas.append({"reasoning_content": THOUGHT})
    if scenario == "tools":
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        )
        deltas += [
            {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
            for piece in TOOL_ARGUMENT_PIECES
        ]
    else:
        deltas += [{"content": piece} for piece in TEXT_PIECES]
    blocks: list[tuple[str | None, Any]] = [(None, chunk(delta)) for delta in deltas]
    blocks.append((None, chunk({}, finish)))
    blocks.append(
        (
            None,
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": _usage("chat", scenario),
            },
        )
    )
    blocks.append((None, "[DONE]"))
    return _stream_plan(blocks, scenario, terminal_blocks=1)


# ---- responses ------------------------------------------------------------------------------


def _responses_output(scenario: str) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if scenario == "reasoning":
        output.append(
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": THOUGHT}],
            }
        )
    if scenario == "tools":
        output.append(
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": "".join(TOOL_ARGUMENT_PIECES),
                "status": "completed",
            }
        )
        return output
    text = {"type": "output_text", "text": "".join(TEXT_PIECES), "annotations": []}
    output.append(
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [text],
        }
    )
    return output


def _response_object(model: str, scenario: str, status: str) -> dict[str, Any]:
    done = status == "completed"
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1764400000,
        "status": status,
        "model": model,
        "output": _responses_output(scenario) if done else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": _usage("responses", scenario) if done else None,
    }


def _responses(model: str, scenario: str, stream: bool) -> Plan:
    final = _response_object(model, scenario, "completed")
    if not stream:
        return _json(200, final)
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": _response_object(model, scenario, "in_progress")})
    ]
    if scenario not in ("tools",):
        for piece in TEXT_PIECES:
            events.append(
                (
                    "response.output_text.delta",
                    {"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": piece},
                )
            )
    for index, item in enumerate(final["output"]):
        events.append(("response.output_item.done", {"output_index": index, "item": item}))
    events.append(("response.completed", {"response": final}))
    blocks: list[tuple[str | None, Any]] = [
        (name, {"type": name, "sequence_number": number, **data})
        for number, (name, data) in enumerate(events)
    ]
    return _stream_plan(blocks, scenario, terminal_blocks=1)


# ---- messages -------------------------------------------------------------------------------


def _message_content(scenario: str) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if scenario == "reasoning":
        content.append({"type": "thinking", "thinking": THOUGHT, "signature": "sig-1"})
    if scenario == "tools":
        content.append(
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
        )
    else:
        content.append({"type": "text", "text": "".join(TEXT_PIECES)})
    return content


def _messages(model: str, scenario: str, stream: bool) -> Plan:
    stop = "tool_use" if scenario == "tools" else "end_turn"
    base = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model}
    usage = _usage("messages", scenario)
    if not stream:
        body = {
            **base,
            "content": _message_content(scenario),
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        return _json(200, body)
    start_usage = {**usage, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "message": {
                    **base,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                }
            },
        ),
        ("ping", {}),
    ]
    for index, block in enumerate(_message_content(scenario)):
        opened: dict[str, Any]
        if block["type"] == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": THOUGHT},
                {"type": "signature_delta", "signature": "sig-1"},
            ]
        elif block["type"] == "tool_use":
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in TOOL_ARGUMENT_PIECES]
        else:
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in TEXT_PIECES]
        events.append(("content_block_start", {"index": index, "content_block": opened}))
        events += [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"index": index}))
    events.append(
        (
            "message_delta",
            {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 6}},
        )
    )
    events.append(("message_stop", {}))
    blocks: list[tuple[str | None, Any]] = [(name, {"type": name, **data}) for name, data in events]
    return _stream_plan(blocks, scenario, terminal_blocks=1)


def _stream_plan(blocks: list[tuple[str | None, Any]], scenario: str, terminal_blocks: int) -> Plan:
    chunks = _sse(blocks)
    if scenario == "truncated":  # a clean end, without the terminal event
        return Plan(200, "text/event-stream; charset=utf-8", chunks[:-terminal_blocks])
    if scenario == "stall":
        return Plan(200, "text/event-stream; charset=utf-8", chunks, stall_after=2)
    if scenario == "cut":
        return Plan(200, "text/event-stream; charset=utf-8", chunks, cut_after=2)
    return Plan(200, "text/event-stream; charset=utf-8", chunks)


_DIALECTS = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}


def plan_for(path: str, request: dict[str, Any]) -> Plan:
    """The answer to ``request`` at ``path``: a pure function (fixed ids and timestamps)."""
    dialect = _DIALECTS.get(path)
    if dialect is None:
        return _json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
    model = str(request.get("model", "plain"))
    scenario = model if model in SCENARIOS else "plain"
    if scenario == "rate-limit":
        return _error(dialect, 429)
    if scenario == "server-error":
        return _error(dialect, 500)
    stream = request.get("stream") is True
    if scenario == "large":
        return _json(200, {"id": "big", "model": model, "text": "x" * LARGE_TEXT_BYTES})
    builder = {"chat": _chat, "responses": _responses, "messages": _messages}[dialect]
    plan = builder(model, scenario, stream)
    if scenario == "slow":
        return Plan(plan.status, plan.content_type, plan.chunks, delay_s=SLOW_S)
    return plan


class FakeUpstream:
    def __init__(self, record: Path | None) -> None:
        self._record = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/healthz":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            request = {}
        if not isinstance(request, dict):
            request = {}
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        if self._record is not None:
            line = {
                "path": scope["path"],
                "raw_path": (scope.get("raw_path") or b"").decode("latin-1"),
                "query": scope.get("query_string", b"").decode("latin-1"),
                "headers": headers,
                "body": body.decode("utf-8", errors="replace"),
            }
            with self._record.open("a") as handle:
                handle.write(json.dumps(line) + "\n")
        plan = plan_for(scope["path"], request)
        delay_ms = dict(headers).get("x-fake-delay-ms")
        delay = plan.delay_s + (float(delay_ms) / 1000 if delay_ms else 0.0)
        if delay:
            await asyncio.sleep(delay)
        response_headers = [(b"content-type", plan.content_type.encode())]
        if plan.content_type == "application/json":
            response_headers.append((b"content-length", str(len(plan.chunks[0])).encode()))
        await send(
            {"type": "http.response.start", "status": plan.status, "headers": response_headers}
        )
        for number, chunk in enumerate(plan.chunks):
            if number == plan.stall_after:
                await self._wait_for_disconnect(receive)
                return
            if number == plan.cut_after:
                raise ConnectionAbortedError("the fake upstream cuts this stream short")
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _wait_for_disconnect(self, receive: Receive) -> None:
        async with asyncio.timeout(STALL_LIMIT_S):
            while (await receive())["type"] != "http.disconnect":
                pass


class FakeUpstreamProcess:
    """The fake upstream in its own process on a free loopback port; polls until it answers."""

    def __init__(self, directory: Path, *, record: bool = True) -> None:
        from tests.support.server import free_port

        self.port = free_port()
        self.record_path = directory / f"upstream-{self.port}.jsonl" if record else None
        self.log_path = directory / f"upstream-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> FakeUpstreamProcess:
        argv = [sys.executable, "-m", "tests.support.fake_upstream", "--port", str(self.port)]
        if self.record_path is not None:
            argv += ["--record", str(self.record_path)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        if answers(
            self.process,
            f"{self.url}/healthz",
            timeout=timeout,
            log_path=self.log_path,
            name="fake upstream",
        ):
            return self
        self.stop()
        raise RuntimeError("fake upstream did not come up")

    def requests(self) -> list[dict[str, Any]]:
        """Every request received so far, in order."""
        if self.record_path is None or not self.record_path.exists():
            return []
        return [json.loads(line) for line in self.record_path.read_text().splitlines() if line]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", type=Path)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    uvicorn.run(
        FakeUpstream(args.record),
        host="127.0.0.1",
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        # A stop cancels what is still answering: the slow scenario's answer waits SLOW_S, and
        # a graceful stop waited for it (its module's teardown took most of 30 s).
        timeout_graceful_shutdown=1,
    )


if __name__ == "__main__":
    main()
