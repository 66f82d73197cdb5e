"""The mapping: one rollout's enriched record (what the ledger stores) as OTLP spans. Pure.

One trace per rollout generation. Its root is the rollout span; under it an ``invoke_agent``
span per agent invocation (a subagent under its parent invocation), a ``chat`` span per
captured model call (under the invocation that lists it, else the rollout), an ``execute_tool``
span per tool call (under its invocation). Gaps and sandbox outcomes are events of the rollout
span, context compactions events of their invocation's span. The run label, the task, the
result and the health verdict are attributes of the rollout span. docs/otel.md has the table.

Times are the captures' and observations' own (``started_at``/``completed_at``, epoch
seconds); what has none takes the window of its parent, and the rollout's window is that of
its children, else the time its events were recorded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from ledger.areas.otel.call_spans import call_attributes, call_error_type, call_failed
from ledger.areas.otel.ids import span_id, trace_id
from ledger.areas.otel.spans import Attributes, Span, SpanEvent, StatusName
from ledger.gym.health.compact import compact_digest, rollout_outcome

FAILED_TOOL_STATUSES = frozenset({"failed", "timeout", "cancelled"})
# A content attribute longer than this is cut (collectors refuse large spans; the ledger keeps
# the whole payload).
MAX_CONTENT_CHARS = 64 * 1024


@dataclass(frozen=True)
class RolloutEvidence:
    """What the mapping reads of one rollout: its current generation's enriched record, its
    run label, and when its first and last events were recorded."""

    rollout_id: str
    generation: int
    record: Mapping[str, Any]
    run_label: str | None
    first_recorded: datetime
    last_recorded: datetime


@dataclass(frozen=True)
class MappingOptions:
    # Message content (requests, responses, tool outputs): off unless asked for, as the
    # GenAI conventions advise.
    content: bool = False


Window = tuple[int, int]


def _ns(seconds: Any, unit: int = 1_000_000_000) -> int | None:
    """Epoch seconds (or, with ``unit``, another measure) as nanoseconds, from the number's
    shortest decimal form: 1764400000.25 s is ...250000000 ns, where the float product would
    be ...249999872."""
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        if not math.isfinite(seconds):
            return None
        return round(Decimal(repr(seconds)) * unit)
    return None


def _window(started: Any, completed: Any, duration_ms: Any = None) -> Window | None:
    start, end = _ns(started), _ns(completed)
    duration = _ns(duration_ms, unit=1_000_000)
    if start is not None and end is None and duration is not None:
        end = start + duration
    if end is not None and start is None and duration is not None:
        start = end - duration
    if start is None or end is None:
        return None
    return (start, max(start, end))


def _placed(duration_ms: Any, parent: Window) -> Window:
    """Something with a duration and no time: at its parent's start (else the parent's span)."""
    duration = _ns(duration_ms, unit=1_000_000)
    if duration is None:
        return parent
    return (parent[0], parent[0] + max(0, duration))


def _cover(windows: Sequence[Window]) -> Window | None:
    if not windows:
        return None
    return (min(w[0] for w in windows), max(w[1] for w in windows))


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text[:MAX_CONTENT_CHARS]


def _status(failed: bool, message: str) -> tuple[StatusName, str]:
    return ("error", message) if failed else ("unset", "")


class _RolloutMapper:
    def __init__(self, evidence: RolloutEvidence, options: MappingOptions) -> None:
        self.evidence = evidence
        self.options = options
        self.trace = trace_id(evidence.rollout_id, evidence.generation)
        record = evidence.record
        capture = record.get("ng_model_call_capture")
        self.calls = _mappings(capture.get("calls")) if isinstance(capture, Mapping) else []
        trajectory = record.get("ng_trajectory")
        observations = record.get("ng_agent_observations")
        observed = (
            _mappings(observations.get("records")) if isinstance(observations, Mapping) else []
        )
        if isinstance(trajectory, Mapping):
            self.invocations = _mappings(trajectory.get("invocations"))
            self.tools = _mappings(trajectory.get("tool_calls"))
            self.gaps = _mappings(trajectory.get("gaps"))
            self.payloads = {
                str(entry["model_call_id"]): entry
                for entry in _mappings(trajectory.get("model_calls"))
                if isinstance(entry.get("model_call_id"), str)
            }
        else:  # the projection failed: the observations as reported, the gaps of both
            self.invocations = [r for r in observed if r.get("kind") == "agent_invocation"]
            self.tools = [r for r in observed if r.get("kind") == "tool_call"]
            self.gaps = [
                *(_mappings(capture.get("gaps")) if isinstance(capture, Mapping) else []),
                *(_mappings(observations.get("gaps")) if isinstance(observations, Mapping) else []),
            ]
            self.payloads = {}
        self.compactions = [r for r in observed if r.get("kind") == "context_compaction"]
        self.sandboxes = [r for r in observed if r.get("kind") == "sandbox"]
        self.invocation_ids = [
            str(inv["invocation_id"])
            for inv in self.invocations
            if isinstance(inv.get("invocation_id"), str)
        ]

    def span_id(self, kind: str, key: str) -> bytes:
        return span_id(self.evidence.rollout_id, self.evidence.generation, kind, key)

    # ---- ownership ---------------------------------------------------------------------------

    def call_owner(self) -> dict[int, str]:
        """Each call (by position) to the first invocation listing its model_call_id, else its
        response_id (as the viewer's timeline attributes them)."""
        by_call: dict[str, str] = {}
        by_response: dict[str, str] = {}
        for inv in self.invocations:
            owner = inv.get("invocation_id")
            if not isinstance(owner, str):
                continue
            for ref in _mappings(inv.get("model_calls")):
                if isinstance(ref.get("model_call_id"), str):
                    by_call.setdefault(ref["model_call_id"], owner)
                if isinstance(ref.get("response_id"), str):
                    by_response.setdefault(ref["response_id"], owner)
        owners: dict[int, str] = {}
        for position, call in enumerate(self.calls):
            owner = by_call.get(call.get("model_call_id") or "")
            if owner is None:
                owner = by_response.get(call.get("response_id") or "")
            if owner is not None:
                owners[position] = owner
        return owners

    def parent_of(self) -> dict[str, str | None]:
        known = set(self.invocation_ids)
        parents: dict[str, str | None] = {}
        for inv in self.invocations:
            if isinstance(inv.get("invocation_id"), str):
                parent = inv.get("parent_invocation_id")
                parents[inv["invocation_id"]] = parent if parent in known else None
        return parents

    # ---- windows -----------------------------------------------------------------------------

    def windows(self) -> tuple[dict[int, Window], dict[int, Window], dict[str, Window], Window]:
        """Calls', tools', invocations' and the rollout's windows (ns)."""
        calls = {
            i: w
            for i, call in enumerate(self.calls)
            if (
                w := _window(
                    call.get("started_at"), call.get("completed_at"), call.get("latency_total_ms")
                )
            )
            is not None
        }
        tools = {
            i: w
            for i, tool in enumerate(self.tools)
            if (
                w := _window(
                    tool.get("started_at"), tool.get("completed_at"), tool.get("duration_ms")
                )
            )
            is not None
        }
        fallback = (
            round(self.evidence.first_recorded.timestamp() * 1_000_000_000),
            round(self.evidence.last_recorded.timestamp() * 1_000_000_000),
        )
        rollout = _cover([*calls.values(), *tools.values()]) or fallback
        owners = self.call_owner()
        parents = self.parent_of()
        own: dict[str, list[Window]] = {inv: [] for inv in self.invocation_ids}
        for position, window in calls.items():
            if position in owners:
                own[owners[position]].append(window)
        for position, window in tools.items():
            owner = self.tools[position].get("invocation_id")
            if owner in own:
                own[str(owner)].append(window)

        # A parent's window covers its subagents': children first (deepest first).
        def depth(inv: str) -> int:
            seen, level, at = set(), 0, parents.get(inv)
            while at is not None and at not in seen:
                seen.add(at)
                level += 1
                at = parents.get(at)
            return level

        invocations: dict[str, Window] = {}
        for inv in sorted(own, key=depth, reverse=True):
            window = _cover(own[inv]) or rollout
            invocations[inv] = window
            parent = parents.get(inv)
            if parent is not None:
                own[parent].append(window)
        return calls, tools, invocations, rollout

    # ---- spans -------------------------------------------------------------------------------

    def spans(self) -> list[Span]:
        call_windows, tool_windows, inv_windows, rollout_window = self.windows()
        root = self.span_id("rollout", "")
        spans = [self.rollout_span(root, rollout_window)]
        parents = self.parent_of()
        for inv in self.invocations:
            if isinstance(inv.get("invocation_id"), str):
                spans.append(self.invocation_span(inv, root, parents, inv_windows))
        owners = self.call_owner()
        for position, call in enumerate(self.calls):
            owner = owners.get(position)
            parent = self.span_id("invocation", owner) if owner is not None else root
            window = call_windows.get(position) or (
                inv_windows[owner] if owner is not None else rollout_window
            )
            spans.append(self.call_span(position, call, parent, window))
        for position, tool in enumerate(self.tools):
            owner = tool.get("invocation_id")
            owned = isinstance(owner, str) and owner in inv_windows
            parent = self.span_id("invocation", str(owner)) if owned else root
            window = tool_windows.get(position) or _placed(
                tool.get("duration_ms"), inv_windows[str(owner)] if owned else rollout_window
            )
            spans.append(self.tool_span(position, tool, parent, window))
        return spans

    def rollout_span(self, root: bytes, window: Window) -> Span:
        ev = self.evidence
        record = ev.record
        attributes: Attributes = {
            "openinference.span.kind": "CHAIN",
            "ledger.rollout_id": ev.rollout_id,
            "ledger.generation": ev.generation,
            "ledger.model_calls": len(self.calls),
            "ledger.tool_calls": len(self.tools),
            "ledger.invocations": len(self.invocations),
            "ledger.gaps": len(self.gaps),
        }
        if ev.run_label is not None:
            attributes["ledger.run"] = ev.run_label
            # OpenInference's session: Phoenix groups a run's traces under it.
            attributes["session.id"] = ev.run_label
        task_id = record.get("task_id")
        if isinstance(task_id, str | int) and not isinstance(task_id, bool):
            attributes["ledger.task_id"] = str(task_id)
        if isinstance(record.get("resolved"), bool):
            attributes["ledger.resolved"] = record["resolved"]
        reward = record.get("reward")
        if isinstance(reward, int | float) and not isinstance(reward, bool):
            attributes["ledger.reward"] = float(reward)
        verdict, findings, _unobserved = rollout_outcome(compact_digest(dict(record)), ())
        attributes["ledger.health.verdict"] = verdict
        attributes["ledger.health.findings"] = len(findings)
        if findings:
            attributes["ledger.health.checks"] = tuple(sorted({str(f["check"]) for f in findings}))
        tokens: dict[str, int] = {}
        for call in self.calls:
            for key in ("tokens_in", "tokens_out"):
                value = call.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    tokens[key] = tokens.get(key, 0) + value
        # The rollout's totals under the ledger's names: as gen_ai.usage.* a backend that adds
        # up a trace's tokens (Phoenix does) would count every call twice.
        if "tokens_in" in tokens:
            attributes["ledger.usage.input_tokens"] = tokens["tokens_in"]
        if "tokens_out" in tokens:
            attributes["ledger.usage.output_tokens"] = tokens["tokens_out"]
        events = [self.gap_event(gap, window[1]) for gap in self.gaps]
        events += [self.sandbox_event(sandbox, window[1]) for sandbox in self.sandboxes]
        return Span(
            trace_id=self.trace,
            span_id=root,
            parent_span_id=None,
            name=f"rollout {ev.rollout_id}",
            kind="internal",
            start_ns=window[0],
            end_ns=window[1],
            attributes=attributes,
            events=tuple(events),
        )

    def invocation_span(
        self,
        inv: Mapping[str, Any],
        root: bytes,
        parents: Mapping[str, str | None],
        windows: Mapping[str, Window],
    ) -> Span:
        invocation_id = str(inv["invocation_id"])
        parent = parents.get(invocation_id)
        attributes: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": invocation_id,
            "gen_ai.agent.name": "subagent" if parent is not None else "agent",
            "openinference.span.kind": "AGENT",
            "ledger.invocation_id": invocation_id,
            "ledger.status": str(inv.get("status") or "unknown"),
        }
        if parent is not None:
            attributes["ledger.parent_invocation_id"] = parent
        if isinstance(inv.get("spawned_by_tool_call_id"), str):
            attributes["ledger.spawned_by_tool_call_id"] = inv["spawned_by_tool_call_id"]
        failed = inv.get("status") == "failed" or inv.get("error_type") is not None
        error_type = str(inv.get("error_type") or inv.get("status"))
        if failed:
            attributes["error.type"] = error_type
        status, message = _status(failed, error_type)
        window = windows[invocation_id]
        events = tuple(
            self.compaction_event(c, window[0])
            for c in self.compactions
            if c.get("invocation_id") == invocation_id
        )
        return Span(
            trace_id=self.trace,
            span_id=self.span_id("invocation", invocation_id),
            parent_span_id=self.span_id("invocation", parent) if parent is not None else root,
            name=f"invoke_agent {invocation_id}",
            kind="internal",
            start_ns=window[0],
            end_ns=window[1],
            attributes=attributes,
            status=status,
            status_message=message,
            events=events,
        )

    def call_span(
        self, position: int, call: Mapping[str, Any], parent: bytes, window: Window
    ) -> Span:
        attributes = call_attributes(call)
        index = call.get("call_index")
        key = str(index if isinstance(index, int) else position)
        if self.options.content:
            payload = self.payloads.get(str(call.get("model_call_id")))
            if payload is not None:
                for side in ("input", "output"):
                    value = payload.get("request" if side == "input" else "response")
                    if value is not None:
                        attributes[f"{side}.value"] = _text(value)
                        attributes[f"{side}.mime_type"] = "application/json"
        failed = call_failed(call)
        status, message = _status(failed, call_error_type(call))
        model = attributes.get("gen_ai.request.model")
        return Span(
            trace_id=self.trace,
            span_id=self.span_id("call", key),
            parent_span_id=parent,
            name=f"chat {model}" if model is not None else "chat",
            kind="client",
            start_ns=window[0],
            end_ns=window[1],
            attributes=attributes,
            status=status,
            status_message=message,
        )

    def tool_span(
        self, position: int, tool: Mapping[str, Any], parent: bytes, window: Window
    ) -> Span:
        tool_call_id = tool.get("tool_call_id")
        key = str(tool_call_id) if isinstance(tool_call_id, str) else f"#{position}"
        name = tool.get("tool_name") if isinstance(tool.get("tool_name"), str) else None
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "openinference.span.kind": "TOOL",
            "ledger.status": str(tool.get("status") or "unknown"),
        }
        if name is not None:
            attributes["gen_ai.tool.name"] = name
            attributes["tool.name"] = name
        if isinstance(tool_call_id, str):
            attributes["gen_ai.tool.call.id"] = tool_call_id
        for field in ("invocation_id", "sandbox_id", "timing_source"):
            if isinstance(tool.get(field), str):
                attributes[f"ledger.{field}"] = tool[field]
        failed = tool.get("status") in FAILED_TOOL_STATUSES or tool.get("error_type") is not None
        error_type = str(tool.get("error_type") or tool.get("status"))
        if failed:
            attributes["error.type"] = error_type
        if self.options.content and tool.get("output") is not None:
            attributes["output.value"] = _text(tool["output"])
        status, message = _status(failed, error_type)
        return Span(
            trace_id=self.trace,
            span_id=self.span_id("tool", key),
            parent_span_id=parent,
            name=f"execute_tool {name}" if name is not None else "execute_tool",
            kind="internal",
            start_ns=window[0],
            end_ns=window[1],
            attributes=attributes,
            status=status,
            status_message=message,
        )

    # ---- events ------------------------------------------------------------------------------

    @staticmethod
    def gap_event(gap: Mapping[str, Any], at: int) -> SpanEvent:
        attributes: Attributes = {"ledger.gap.code": str(gap.get("code"))}
        for field in ("invocation_id", "detail"):
            if isinstance(gap.get(field), str):
                attributes[f"ledger.gap.{field}"] = gap[field]
        return SpanEvent("ledger.gap", at, attributes)

    @staticmethod
    def sandbox_event(sandbox: Mapping[str, Any], at: int) -> SpanEvent:
        attributes: Attributes = {}
        for field in ("role", "provider", "sandbox_id", "outcome", "error_type"):
            if isinstance(sandbox.get(field), str):
                attributes[f"ledger.sandbox.{field}"] = sandbox[field]
        for field in ("exit_code", "wall_time_s", "cpu_time_s", "peak_memory_mib"):
            value = sandbox.get(field)
            if isinstance(value, int | float) and not isinstance(value, bool):
                attributes[f"ledger.sandbox.{field}"] = value
        return SpanEvent("ledger.sandbox", at, attributes)

    def compaction_event(self, compaction: Mapping[str, Any], fallback: int) -> SpanEvent:
        attributes: Attributes = {"ledger.compaction.outcome": str(compaction.get("outcome"))}
        if isinstance(compaction.get("trigger"), str):
            attributes["ledger.compaction.trigger"] = compaction["trigger"]
        for field in ("tokens_before", "tokens_after"):
            value = compaction.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                attributes[f"ledger.compaction.{field}"] = value
        if self.options.content and isinstance(compaction.get("summary"), str):
            attributes["ledger.compaction.summary"] = _text(compaction["summary"])
        at = _ns(compaction.get("observed_at"))
        return SpanEvent("ledger.context_compaction", fallback if at is None else at, attributes)


def rollout_spans(evidence: RolloutEvidence, options: MappingOptions | None = None) -> list[Span]:
    """Every span of one rollout's trace, the rollout span first."""
    return _RolloutMapper(evidence, options or MappingOptions()).spans()
