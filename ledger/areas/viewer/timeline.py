"""The rollout's timeline as SVG: model calls and tool calls on one time axis, one lane group
per invocation (subagents indented under their parent), parallel tools stacked in lanes.

Each bar is a link to its row in the calls or tools table (so keyboard users reach it with Tab)
and carries a ``<title>`` (the tooltip, without script) and ``data-*`` attributes (start, end,
kind, index) that the browser tests read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ledger.areas.viewer.markup import Html, esc, html
from ledger.areas.viewer.rollout_query import Call, Invocation, ToolCall

LABEL_WIDTH = 240
PLOT_WIDTH = 940
LANE_HEIGHT = 20
AXIS_HEIGHT = 26
# A call of a millisecond in a rollout of an hour is still a bar one can see and click: the
# 429 that ended a rollout must not be a sub-pixel sliver. Wider than its duration is the lesser
# error (the tooltip and the table give the duration).
MIN_BAR = 6.0
# Failed bars are hatched (and outlined), truncated ones dashed and hollow: never colour alone.
PATTERNS = (
    '<defs><pattern id="hatch-failed" patternUnits="userSpaceOnUse" width="5" height="5"'
    ' patternTransform="rotate(45)"><rect class="hatch-ink" width="2.5" height="5"/>'
    '<rect class="hatch-paper" x="2.5" width="2.5" height="5"/></pattern></defs>'
)
UNATTRIBUTED = "(calls not attributed to an invocation)"


@dataclass
class Lane:
    label: str
    depth: int
    calls: list[Call]
    tools: list[ToolCall]


def invocation_order(invocations: Sequence[Invocation]) -> list[tuple[Invocation, int]]:
    """Depth-first from the roots, children in listed order (a parent not listed is a root)."""
    known = {inv.invocation_id for inv in invocations}
    children: dict[str | None, list[Invocation]] = {}
    for inv in invocations:
        parent = inv.parent_invocation_id if inv.parent_invocation_id in known else None
        children.setdefault(parent, []).append(inv)
    ordered: list[tuple[Invocation, int]] = []
    seen: set[str] = set()

    def visit(inv: Invocation, depth: int) -> None:
        if inv.invocation_id in seen:
            return
        seen.add(inv.invocation_id)
        ordered.append((inv, depth))
        for child in children.get(inv.invocation_id, []):
            visit(child, depth + 1)

    for root in children.get(None, []):
        visit(root, 0)
    for inv in invocations:  # anything left (a cycle cannot be stored, but be total)
        visit(inv, 0)
    return ordered


def call_owners(calls: Sequence[Call], invocations: Sequence[Invocation]) -> dict[int, str | None]:
    """Each call's invocation (by ``call_index``): the first that lists its model_call_id,
    else its response_id; None when no invocation does."""
    by_call: dict[str, str] = {}
    by_response: dict[str, str] = {}
    for inv in invocations:
        for model_call_id in inv.model_call_ids:
            by_call.setdefault(model_call_id, inv.invocation_id)
        for response_id in inv.response_ids:
            by_response.setdefault(response_id, inv.invocation_id)
    owners: dict[int, str | None] = {}
    for call in calls:
        owner = by_call.get(call.model_call_id) if call.model_call_id is not None else None
        if owner is None and call.response_id is not None:
            owner = by_response.get(call.response_id)
        owners[call.call_index] = owner
    return owners


def lanes(
    calls: Sequence[Call],
    tools: Sequence[ToolCall],
    invocations: Sequence[Invocation],
    owners: dict[int, str | None],
) -> list[Lane]:
    by_id: dict[str, Lane] = {}
    found: list[Lane] = []
    for inv, depth in invocation_order(invocations):
        marker = "subagent " if inv.parent_invocation_id else ""
        lane = Lane(f"{marker}{inv.invocation_id}", depth, [], [])
        by_id[inv.invocation_id] = lane
        found.append(lane)
    loose = Lane(UNATTRIBUTED, 0, [], [])
    for call in calls:
        owner = owners.get(call.call_index)
        (by_id[owner] if owner is not None else loose).calls.append(call)
    for tool in tools:
        if tool.invocation_id not in by_id:
            lane = Lane(tool.invocation_id, 0, [], [])
            by_id[tool.invocation_id] = lane
            found.append(lane)
        by_id[tool.invocation_id].tools.append(tool)
    if loose.calls:
        found.append(loose)
    return found


def _pack(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """A row for each interval so that none overlap within a row (greedy, in start order)."""
    ends: list[float] = []
    rows = [0] * len(intervals)
    for i in sorted(range(len(intervals)), key=lambda k: intervals[k]):
        start, end = intervals[i]
        for row, last in enumerate(ends):
            if start >= last:
                ends[row] = end
                rows[i] = row
                break
        else:
            ends.append(end)
            rows[i] = len(ends) - 1
    return rows


def _timed_calls(calls: Sequence[Call]) -> list[Call]:
    return [c for c in calls if c.started_at is not None and c.completed_at is not None]


def _timed_tools(tools: Sequence[ToolCall]) -> list[ToolCall]:
    return [t for t in tools if t.started_at is not None and t.completed_at is not None]


def timeline_svg(
    calls: Sequence[Call],
    tools: Sequence[ToolCall],
    invocations: Sequence[Invocation],
    owners: dict[int, str | None],
) -> Html:
    timed_calls = _timed_calls(calls)
    timed_tools = _timed_tools(tools)
    if not timed_calls and not timed_tools:
        return Html('<p class="muted">No call or tool has both a start and an end time.</p>')
    starts = [c.started_at for c in timed_calls] + [t.started_at for t in timed_tools]
    ends = [c.completed_at for c in timed_calls] + [t.completed_at for t in timed_tools]
    t0 = min(s for s in starts if s is not None)
    t1 = max(e for e in ends if e is not None)
    span = max(t1 - t0, 1e-6)
    scale = PLOT_WIDTH / span

    rows: list[str] = []
    bars: list[str] = []
    y = AXIS_HEIGHT
    for lane in lanes(calls, tools, invocations, owners):
        lane_calls = _timed_calls(lane.calls)
        lane_tools = _timed_tools(lane.tools)
        if not lane_calls and not lane_tools:
            continue
        tool_rows = _pack([(t.started_at or 0.0, t.completed_at or 0.0) for t in lane_tools])
        height = (1 + (max(tool_rows) + 1 if tool_rows else 0)) * LANE_HEIGHT
        indent = 6 + 12 * lane.depth
        rows.append(
            html(
                '<g class="lane" data-lane="{label}"><line class="grid" x1="0" x2="{w}"'
                ' y1="{y}" y2="{y}"/>'
                '<text class="lane-label" x="{x}"'
                ' y="{ty}">{short}<title>{label}</title></text></g>',
                label=lane.label,
                short=lane.label if len(lane.label) <= 34 else lane.label[:33] + "…",
                w=LABEL_WIDTH + PLOT_WIDTH,
                y=y,
                x=indent,
                ty=y + 14,
            )
        )
        for call in lane_calls:
            bars.append(
                _bar(
                    "call",
                    call.call_index,
                    call.started_at,
                    call.completed_at,
                    t0,
                    scale,
                    y,
                    _call_classes(call),
                    _call_title(call),
                    f"#call-{call.call_index}",
                )
            )
        for tool, row in zip(lane_tools, tool_rows, strict=True):
            classes = "failed" if tool.failed else ("truncated" if tool.truncated else "")
            title = f"tool {tool.tool_name or tool.tool_call_id} · {tool.status}"
            if tool.duration_ms is not None:
                title += f" · {tool.duration_ms:,.0f} ms"
            bars.append(
                _bar(
                    "tool",
                    tool.position,
                    tool.started_at,
                    tool.completed_at,
                    t0,
                    scale,
                    y + (row + 1) * LANE_HEIGHT,
                    classes,
                    title,
                    f"#tool-{tool.position}",
                )
            )
        y += height
    axis = [
        html(
            '<text class="axis" x="{x}" y="14">+{label}s</text>'
            '<line class="grid" x1="{x}" x2="{x}" y1="18" y2="{bottom}"/>',
            x=f"{LABEL_WIDTH + PLOT_WIDTH * i / 5:.1f}",
            label=f"{span * i / 5:.2f}",
            bottom=y,
        )
        for i in range(5)
    ]
    return html(
        '<svg class="timeline" role="img" aria-labelledby="timeline-title" viewBox="0 0 {w} {h}" '
        'width="{w}" height="{h}" data-t0="{t0}" data-scale="{scale}">'
        '<title id="timeline-title">Timeline of {n_calls} model calls and {n_tools} tool'
        " calls</title>"
        "{defs}{axis}{rows}{bars}</svg>",
        w=LABEL_WIDTH + PLOT_WIDTH + 10,
        h=y + 4,
        t0=repr(t0),
        scale=repr(scale),
        n_calls=len(timed_calls),
        n_tools=len(timed_tools),
        defs=Html(PATTERNS),
        axis=Html("".join(axis)),
        rows=Html("".join(rows)),
        bars=Html("".join(bars)),
    )


def _call_classes(call: Call) -> str:
    if call.failed:
        return "failed"
    if call.truncated:
        return "truncated"
    return ""


def _call_title(call: Call) -> str:
    parts = [f"call {call.call_index}", call.model or call.model_ref_name or "model"]
    if call.latency_ms is not None:
        parts.append(f"{call.latency_ms:,.0f} ms")
    if call.failed:
        parts.append(f"failed ({call.error_category or call.status_code})")
    elif call.truncated:
        parts.append(f"truncated ({call.finish_reason or call.response_status})")
    return " · ".join(parts)


def _bar(
    kind: str,
    index: int,
    start: float | None,
    end: float | None,
    t0: float,
    scale: float,
    y: int,
    classes: str,
    title: str,
    href: str,
) -> str:
    assert start is not None and end is not None
    x = LABEL_WIDTH + (start - t0) * scale
    width = max((end - start) * scale, MIN_BAR)
    return html(
        '<a href="{href}" aria-label="{title}"><rect class="bar {kind} {classes}"'
        ' data-kind="{kind}" '
        'data-index="{index}" data-start="{start}" data-end="{end}" x="{x}" y="{y}" '
        'width="{width}" height="{h}" rx="2"><title>{title}</title></rect></a>',
        href=href,
        title=title,
        kind=kind,
        classes=classes,
        index=index,
        start=repr(start),
        end=repr(end),
        x=f"{x:.2f}",
        y=y + 3,
        width=f"{width:.2f}",
        h=LANE_HEIGHT - 6,
    )


__all__ = ["esc", "lanes", "timeline_svg"]
