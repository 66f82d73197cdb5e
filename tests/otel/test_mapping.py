"""The mapping on both backends: a rollout written through the API (calls of the three
dialects and a failed one, a root agent and a subagent, tools, a compaction, a sandbox, a gap,
a run label) read back by the exporter's own query and mapped to spans, then encoded with
OpenTelemetry's protobuf messages and decoded again."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import httpx
from fastapi import FastAPI
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ledger.app.bootstrap import Ledger
from ledger.areas.otel.ids import span_id, trace_id
from ledger.areas.otel.mapping import MappingOptions, rollout_spans
from ledger.areas.otel.source import ChangedRollout, rollouts_by_id
from ledger.areas.otel.spans import Span
from ledger.areas.otel.wire import encode_request
from tests.support.exchanges import (
    chat_exchange,
    failed_exchange,
    messages_exchange,
    responses_exchange,
)
from tests.support.views import views_caught_up

RID = "otel-1"


async def write_rollout(client: httpx.AsyncClient) -> None:
    for body in (
        chat_exchange(model_call_id="c-chat"),
        responses_exchange(model_call_id="c-resp"),
        messages_exchange(model_call_id="c-msg"),
        failed_exchange(model_call_id="c-fail"),
    ):
        answer = await client.post(f"/v1/rollouts/{RID}/model-calls?run=run-7", json=body)
        assert answer.status_code in (200, 201), answer.text
    bundle: dict[str, Any] = {
        "source": "harness",
        "records": [
            {
                "kind": "agent_invocation",
                "invocation_id": "root",
                "status": "completed",
                "model_calls": [{"model_call_id": "c-chat"}, {"model_call_id": "c-resp"}],
            },
            {
                "kind": "agent_invocation",
                "invocation_id": "sub",
                "parent_invocation_id": "root",
                "spawned_by_tool_call_id": "t-spawn",
                "status": "failed",
                "error_type": "subagent_crashed",
                "model_calls": [{"model_call_id": "c-msg"}],
            },
            {
                "kind": "tool_call",
                "invocation_id": "root",
                "tool_call_id": "t-spawn",
                "tool_name": "spawn",
                "started_at": 1764400001.5,
                "completed_at": 1764400002.0,
                "status": "completed",
            },
            {
                "kind": "tool_call",
                "invocation_id": "sub",
                "tool_call_id": "t-slow",
                "tool_name": "bash",
                "duration_ms": 250.0,
                "status": "timeout",
            },
            {
                "kind": "context_compaction",
                "invocation_id": "sub",
                "observed_at": 1764400004.25,
                "trigger": "window_full",
                "tokens_before": 9000,
                "tokens_after": 1200,
                "outcome": "completed",
                "summary": "the story so far",
            },
            {"kind": "sandbox", "role": "agent", "outcome": "oom", "peak_memory_mib": 2048.0},
        ],
        "gaps": [{"code": "sandbox_observation_unavailable", "invocation_id": "sub"}],
    }
    answer = await client.post(f"/v1/rollouts/{RID}/observations?run=run-7", json=bundle)
    assert answer.status_code in (200, 201), answer.text


async def read(app: FastAPI) -> ChangedRollout:
    """The rollout as the export reads it, once the views hold what the client wrote."""
    await views_caught_up(app)
    ledger: Ledger = app.state.ledger
    [found] = await ledger.store.read_sync(partial(rollouts_by_id, rollout_ids=[RID]))
    return found


def named(spans: list[Span]) -> dict[str, Span]:
    return {span.name: span for span in spans}


async def test_a_rollout_maps_to_its_span_tree(client: httpx.AsyncClient, app: FastAPI) -> None:
    await write_rollout(client)
    found = await read(app)
    assert found.evidence.run_label == "run-7"
    spans = rollout_spans(found.evidence)
    by_call = {
        s.attributes["ledger.model_call_id"]: s
        for s in spans
        if "ledger.call_index" in s.attributes
    }
    tools = {
        s.attributes["gen_ai.tool.call.id"]: s
        for s in spans
        if "gen_ai.tool.call.id" in s.attributes
    }
    spans_by_name = named(spans)
    root = spans[0]
    agent, sub = spans_by_name["invoke_agent root"], spans_by_name["invoke_agent sub"]
    assert len(spans) == 1 + 2 + 4 + 2
    assert {s.trace_id for s in spans} == {trace_id(RID, 0)}
    assert root.parent_span_id is None and root.name == f"rollout {RID}"
    assert agent.parent_span_id == root.span_id
    assert sub.parent_span_id == agent.span_id
    assert by_call["c-chat"].parent_span_id == by_call["c-resp"].parent_span_id == agent.span_id
    assert by_call["c-msg"].parent_span_id == sub.span_id
    # Listed by no invocation: under the rollout.
    assert by_call["c-fail"].parent_span_id == root.span_id
    assert tools["t-spawn"].parent_span_id == agent.span_id
    assert tools["t-slow"].parent_span_id == sub.span_id

    # Each dialect's provider and the normalised fields.
    chat, resp, msg = by_call["c-chat"], by_call["c-resp"], by_call["c-msg"]
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert resp.attributes["gen_ai.provider.name"] == "openai"
    assert msg.attributes["gen_ai.provider.name"] == "anthropic"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12
    assert chat.attributes["llm.token_count.prompt_details.cache_read"] == 4
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert resp.attributes["gen_ai.usage.reasoning_tokens"] == 3
    assert resp.attributes["gen_ai.response.id"] == "resp_1"
    assert resp.attributes["ledger.client_session_id"] == "session-1"
    assert msg.attributes["gen_ai.usage.cache_creation_input_tokens"] == 20
    assert msg.attributes["gen_ai.request.model"] == "claude"
    assert chat.kind == "client" and chat.attributes["openinference.span.kind"] == "LLM"
    # The captures' own times.
    assert (chat.start_ns, chat.end_ns) == (1764400000_250000000, 1764400001_500000000)

    # Errors: the failed call, the failed subagent, the timed-out tool.
    failed = by_call["c-fail"]
    assert (failed.status, failed.attributes["error.type"]) == ("error", "upstream_error")
    assert failed.attributes["http.response.status_code"] == 503
    assert (sub.status, sub.attributes["error.type"]) == ("error", "subagent_crashed")
    assert (tools["t-slow"].status, tools["t-slow"].attributes["error.type"]) == (
        "error",
        "timeout",
    )
    assert chat.status == "unset" and "error.type" not in chat.attributes
    # A tool with a duration and no times sits at the start of its invocation.
    assert tools["t-slow"].end_ns - tools["t-slow"].start_ns == 250_000_000
    assert tools["t-slow"].start_ns == sub.start_ns

    # Windows: each parent covers its children.
    for span in spans[1:]:
        parent = next(p for p in spans if p.span_id == span.parent_span_id)
        assert parent.start_ns <= span.start_ns and span.end_ns <= parent.end_ns, span.name

    # Events: the gap and the sandbox on the rollout, the compaction on its invocation.
    gaps = {e.attributes["ledger.gap.code"] for e in root.events if e.name == "ledger.gap"}
    assert "sandbox_observation_unavailable" in gaps
    [sandbox] = [e for e in root.events if e.name == "ledger.sandbox"]
    assert sandbox.attributes["ledger.sandbox.outcome"] == "oom"
    [compaction] = sub.events
    assert compaction.time_ns == 1764400004_250000000
    assert compaction.attributes["ledger.compaction.tokens_before"] == 9000
    assert "ledger.compaction.summary" not in compaction.attributes

    # The rollout span: run label (and OpenInference session), verdict, totals.
    assert root.attributes["ledger.run"] == root.attributes["session.id"] == "run-7"
    health = (await client.get(f"/v1/rollouts/{RID}/health")).json()
    assert root.attributes["ledger.health.verdict"] == health["verdict"] == "unhealthy"
    checks = tuple(sorted({finding["check"] for finding in health["findings"]}))
    assert root.attributes["ledger.health.checks"] == checks
    assert root.attributes["ledger.health.findings"] == len(health["findings"])
    metrics = found.evidence.record["ng_model_call_capture"]["metrics"]
    assert root.attributes["ledger.usage.input_tokens"] == metrics["tokens_in"]
    assert root.attributes["ledger.usage.output_tokens"] == metrics["tokens_out"]
    assert not any(k.startswith("gen_ai.usage") for k in root.attributes)


async def test_ids_are_stable_and_content_is_opt_in(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await write_rollout(client)
    found = await read(app)
    plain = rollout_spans(found.evidence)
    again = rollout_spans((await read(app)).evidence)
    assert [(s.trace_id, s.span_id, s.parent_span_id) for s in plain] == [
        (s.trace_id, s.span_id, s.parent_span_id) for s in again
    ]
    assert plain[0].span_id == span_id(RID, 0, "rollout", "")
    assert trace_id(RID, 1) != trace_id(RID, 0)
    assert len({s.span_id for s in plain}) == len(plain)
    assert not any(k.endswith(".value") for s in plain for k in s.attributes)

    content = rollout_spans(found.evidence, MappingOptions(content=True))
    chat = next(s for s in content if s.attributes.get("ledger.model_call_id") == "c-chat")
    assert json.loads(str(chat.attributes["input.value"])) == chat_exchange()["request"] | {
        "messages": [{"role": "user", "content": "hello"}]
    }
    assert json.loads(str(chat.attributes["output.value"]))["id"] == "chatcmpl-1"
    compaction = named(content)["invoke_agent sub"].events[0]
    assert compaction.attributes["ledger.compaction.summary"] == "the story so far"


async def test_spans_encode_as_otlp_protobuf(client: httpx.AsyncClient, app: FastAPI) -> None:
    await write_rollout(client)
    spans = rollout_spans((await read(app)).evidence)
    request = ExportTraceServiceRequest()
    request.ParseFromString(encode_request(spans))
    [resource] = request.resource_spans
    service = {kv.key: kv.value.string_value for kv in resource.resource.attributes}
    assert service["service.name"] == "rollout-ledger"
    decoded = resource.scope_spans[0].spans
    assert [s.span_id for s in decoded] == [s.span_id for s in spans]
    assert decoded[0].parent_span_id == b""
    chat = next(
        s
        for s in decoded
        if any(
            a.key == "ledger.model_call_id" and a.value.string_value == "c-chat"
            for a in s.attributes
        )
    )
    attributes = {a.key: a.value for a in chat.attributes}
    assert attributes["gen_ai.usage.input_tokens"].int_value == 12
    assert [
        v.string_value for v in attributes["gen_ai.response.finish_reasons"].array_value.values
    ] == ["tool_calls"]
    assert chat.kind == chat.SPAN_KIND_CLIENT
    assert chat.start_time_unix_nano == 1764400000_250000000
    failed = next(
        s
        for s in decoded
        if s.status.code == s.status.STATUS_CODE_ERROR and s.name.startswith("chat")
    )
    assert failed.status.message == "upstream_error"
