"""``/ui/rollouts/{id}/transcript``: a rollout read as a conversation.

Each captured call is a turn: what its request adds to the conversation (the items after the
longest prefix it shares with the previous request of the same invocation, less the echo of
the previous reply), then its reply, headed by the call's index (a link to its row), model,
status, tokens and latency. Tool results sit beside the tool calls they answer; reasoning is
collapsed; long texts, images and unknown items are folded with their byte count. Every value
is escaped text (``markup.html``), bidirectional controls are shown as their code points, and
a text is cut at ``TEXT_SHOWN`` characters, so a hostile payload renders inert and bounded.

Paged like the rollout page's calls (100 calls from ``calls_from``), so a transcript page and
a page of the calls table show the same calls."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from ledger.areas.viewer.markup import Html, html, join, number, query
from ledger.areas.viewer.overview_page import rollout_url
from ledger.areas.viewer.rollout_query import CALLS_PER_PAGE, Call
from ledger.areas.viewer.timeline import call_owners
from ledger.areas.viewer.transcript import (
    Message,
    Part,
    attach_results,
    error_text,
    input_items,
    item_message,
    new_items,
    output_messages,
    system_message,
)
from ledger.areas.viewer.transcript_query import CallWithPayload, TranscriptData

# A text longer than this is folded (its byte count in the summary) ...
TEXT_INLINE = 2_000
# ... and cut at this many characters (the whole is in the call's payload).
TEXT_SHOWN = 20_000
PREVIEW = 120
# Inline images at most this large are drawn inside their fold (data: URLs, raster types).
IMAGE_DRAWN = 256 * 1024
RASTER = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
# Bidirectional controls would reorder the text around them (an "RTL override" attack on
# what a reader sees); they are shown as their code points instead.
_BIDI = {
    code: f"⟦U+{code:04X}⟧"
    for code in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}


def transcript_url(rollout_id: str, calls_from: int | None = None) -> str:
    return f"{rollout_url(rollout_id)}/transcript" + query(calls_from=calls_from or None)


def visible_controls(text: str) -> str:
    return text.translate(_BIDI)


def _size(text: str) -> str:
    return f"{len(text.encode('utf-8', 'replace')):,} bytes"


def text_block(text: str, cls: str = "text", payload: str | None = None) -> Html:
    """A text as text: inline when short, else folded with its byte count and cut."""
    if len(text) <= TEXT_INLINE:
        return html('<div class="{cls}" dir="auto">{t}</div>', cls=cls, t=visible_controls(text))
    cut = (
        html(
            '<p class="muted">Cut at {n} characters; the whole text: {link}.</p>',
            n=f"{TEXT_SHOWN:,}",
            link=(
                html('<a href="{h}">the call\'s request and response</a>', h=payload)
                if payload
                else "the call's request and response"
            ),
        )
        if len(text) > TEXT_SHOWN
        else Html("")
    )
    return html(
        '<details class="fold"><summary>Long text · {size} · <span class="preview"'
        ' dir="auto">{preview}…</span></summary><div class="{cls}" dir="auto">{t}</div>{cut}'
        "</details>",
        size=_size(text),
        preview=visible_controls(text[:PREVIEW]),
        cls=cls,
        t=visible_controls(text[:TEXT_SHOWN]),
        cut=cut,
    )


def _image(part: Part) -> Html:
    if part.media_type is None:
        return html(
            '<div class="part image"><span class="muted">Image at</span> <code>{u}</code></div>',
            u=visible_controls(part.text[:2000]),
        )
    data = part.text[part.text.index(";base64,") + 8 :]
    size = len(data) * 3 // 4
    drawn = Html("")
    if part.media_type in RASTER and size <= IMAGE_DRAWN:
        try:
            base64.b64decode(data, validate=True)
            drawn = html('<img src="{src}" alt="An image of the conversation">', src=part.text)
        except (binascii.Error, ValueError):
            drawn = Html('<p class="muted">Not valid base64: not drawn.</p>')
    return html(
        '<details class="fold image"><summary>Image · {t} · {n} bytes</summary>{img}</details>',
        t=part.media_type,
        n=f"{size:,}",
        img=drawn,
    )


def _result(part: Part, payload: str | None, *, standalone: bool) -> Html:
    head = (
        html("Result of tool call <code>{id}</code>", id=part.call_id or "?")
        if standalone
        else Html("Result")
    )
    return html(
        '<div class="tool-result{cls}" data-result-of="{id}"><div class="part-head">{head}'
        "{err}</div>{body}</div>",
        cls=" failed" if part.is_error else "",
        id=part.call_id or "",
        head=head,
        err=Html(' <span class="tag failed">error</span>') if part.is_error else "",
        body=text_block(part.text, payload=payload),
    )


def part_html(part: Part, payload: str | None) -> Html:
    if part.kind == "text":
        return text_block(part.text, payload=payload)
    if part.kind == "reasoning":
        return html(
            '<details class="reasoning"><summary>Reasoning · {n}</summary>{body}</details>',
            n=_size(part.text),
            body=text_block(part.text, payload=payload),
        )
    if part.kind == "tool_call":
        result = (
            _result(part.result, payload, standalone=False)
            if part.result is not None
            else Html('<p class="muted no-result">No result among the calls shown.</p>')
        )
        return html(
            '<div class="tool-call" data-tool-call="{id}"><div class="tool-args"><div'
            ' class="part-head">Tool call <code>{name}</code> <span class="muted">{id}</span>'
            '</div><pre class="args">{args}</pre></div>{result}</div>',
            id=part.call_id or "",
            name=visible_controls(part.name or "?"),
            args=visible_controls(part.text[:TEXT_SHOWN]),
            result=result,
        )
    if part.kind == "tool_result":
        return _result(part, payload, standalone=True)
    if part.kind == "image":
        return _image(part)
    return html(
        '<details class="fold"><summary>Other item · {size}</summary><pre class="args">{t}</pre>'
        "</details>",
        size=_size(part.text),
        t=visible_controls(part.text[:TEXT_SHOWN]),
    )


def message_html(message: Message, payload: str | None) -> Html:
    role = message.role if message.role in ROLES else "other"
    return html(
        '<div class="msg role-{cls}" data-role="{role}"><div class="role">{role}</div>{parts}'
        "</div>",
        cls=role,
        role=visible_controls(message.role[:40]),
        parts=join(part_html(p, payload) for p in message.parts),
    )


def _status(call: Call) -> Html:
    if call.damaged:
        return Html('<span class="tag failed">✕ damaged</span>')
    if call.failed:
        return html('<span class="tag failed">✕ failed {c}</span>', c=call.status_code or "")
    if call.truncated:
        return Html('<span class="tag truncated">◩ truncated</span>')
    return html('<span class="ok">{c}</span>', c=call.status_code or "–")


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} ms"


class Turn:
    def __init__(self, item: CallWithPayload, owner: str | None) -> None:
        self.item = item
        self.owner = owner
        self.inputs: list[Message] = []
        self.outputs: list[Message] = []
        self.dropped = 0
        self.echoed = 0


def thread_turns(data: TranscriptData) -> list[Turn]:
    """Each call's new input items and reply, per invocation thread (see the module doc), the
    call before the page first when there is one; tool results not yet moved to their calls
    (what the compare page compares: a result's place then does not depend on the page)."""
    everything = ([data.before] if data.before else []) + data.calls
    owners = call_owners([c.call for c in everything], data.invocations)
    items: dict[str | None, list[Any]] = {}
    replies: dict[str | None, list[Message]] = {}
    systems: dict[str | None, tuple[object, ...] | None] = {}
    turns = []
    for n, cw in enumerate(everything):
        call, ex = cw.call, cw.exchange
        owner = owners.get(call.call_index)
        turn = Turn(cw, owner)
        current = input_items(call.dialect, ex.request)
        shared, turn.dropped = new_items(items.get(owner, []), current)
        # The call before the page is read for its items and reply only (what the page's
        # first call continues): its whole history is not turned into messages.
        context = n == 0 and data.before is not None
        raw_new = [] if context else current[shared:]
        messages = [item_message(call.dialect, raw) for raw in raw_new]
        echo = [m.key() for m in replies.get(owner, [])]
        while messages and echo and messages[0].key() in echo:
            echo.remove(messages[0].key())
            messages.pop(0)
            turn.echoed += 1
        system = system_message(call.dialect, ex.request)
        key = system.key() if system is not None else None
        if system is not None and systems.get(owner) != key:
            messages.insert(0, system)
        systems[owner] = key
        turn.inputs = messages
        turn.outputs = output_messages(call.dialect, ex.response)
        items[owner], replies[owner] = current, turn.outputs
        turns.append(turn)
    return turns


def _turns(data: TranscriptData) -> list[Turn]:
    """The page's turns, each tool result beside the call it answers."""
    turns = thread_turns(data)
    groups: list[list[Message]] = []
    for turn in turns:
        groups.extend([turn.inputs, turn.outputs])
    attached = attach_results(groups)
    for n, turn in enumerate(turns):
        turn.inputs, turn.outputs = attached[2 * n], attached[2 * n + 1]
    return turns[1:] if data.before else turns


def _turn_html(data: TranscriptData, turn: Turn) -> Html:
    call, ex = turn.item.call, turn.item.exchange
    i = call.call_index
    payload = f"{rollout_url(data.rollout_id)}/calls/{i}/payload"
    row = rollout_url(data.rollout_id) + query(calls_from=data.calls_from or None) + f"#call-{i}"
    notes = []
    if turn.dropped:
        notes.append(
            html(
                '<p class="muted note">The request no longer carries {n} earlier items'
                " (history edited or compacted).</p>",
                n=turn.dropped,
            )
        )
    body: list[Html] = [message_html(m, payload) for m in turn.inputs]
    if ex.redacted:
        body.append(Html('<p class="muted">The payload was redacted by compaction.</p>'))
    body.extend(message_html(m, payload) for m in turn.outputs)
    failure = error_text(ex.response, ex.response_raw) if call.failed else None
    if failure is not None:
        body.append(
            html(
                '<div class="msg role-error" data-role="error"><div class="role">error</div>'
                "{t}</div>",
                t=text_block(failure, payload=payload),
            )
        )
    if not turn.outputs and failure is None and not ex.redacted:
        body.append(Html('<p class="muted">No reply in the captured response.</p>'))
    tokens = (
        f"{number(call.tokens_in)} in · {number(call.tokens_out)} out"
        f" · {number(call.cached_tokens)} cached · {number(call.tokens_reasoning)} reasoning"
    )
    return html(
        '<section class="turn{fcls}" id="turn-{i}" data-call="{i}" aria-labelledby="turn-{i}-h">'
        '<h3 class="turn-head" id="turn-{i}-h"><a href="{row}">Call #{i}</a> {status}'
        ' <span class="muted">{model}{inv}</span></h3>'
        '<p class="turn-meta"><span data-meta="tokens">{tokens}</span> · <span'
        ' data-meta="latency">{lat}</span> · TTFT {ttft}{finish}{echo}</p>{notes}{body}</section>',
        fcls=" failed" if call.failed else " truncated" if call.truncated else "",
        i=i,
        row=row,
        status=_status(call),
        model=call.model or call.model_ref_name or "model",
        inv=f" · {turn.owner}" if turn.owner else "",
        tokens=tokens,
        lat=_ms(call.latency_ms),
        ttft=_ms(call.ttft_ms),
        finish=f" · finish {call.finish_reason}" if call.finish_reason else "",
        echo=(
            f" · the previous reply ({turn.echoed} item{'s' if turn.echoed > 1 else ''})"
            " is not repeated"
            if turn.echoed
            else ""
        ),
        notes=join(notes),
        body=join(body),
    )


def _pager(data: TranscriptData) -> Html:
    if data.calls_previous is None and data.calls_next is None:
        return Html("")
    shown = (
        f"Calls #{data.calls[0].call.call_index} to #{data.calls[-1].call.call_index}"
        if data.calls
        else "No call on this page"
    )
    links = [html('<span class="muted">{s} of {n}</span>', s=shown, n=number(data.call_count))]
    if data.calls_previous is not None:
        links.append(
            html(
                '<a href="{h}" data-pager="turns-previous">Previous {n} calls</a>',
                h=transcript_url(data.rollout_id, data.calls_previous),
                n=CALLS_PER_PAGE,
            )
        )
    if data.calls_next is not None:
        links.append(
            html(
                '<a href="{h}" data-pager="turns-next">Next calls</a>',
                h=transcript_url(data.rollout_id, data.calls_next),
            )
        )
    return html('<nav class="pager" aria-label="Pages of the transcript">{l}</nav>', l=join(links))


def _producer(data: TranscriptData) -> Html:
    if not data.conversations and not data.turns:
        return Html("")
    sections = [Html('<h2 id="producer-heading">As the producer recorded it</h2>')]
    shown = sum(len(items) for _, items in data.conversations)
    for invocation_id, items in data.conversations:
        messages = attach_results([[item_message("responses", raw) for raw in items]])[0]
        sections.append(
            html(
                '<section class="conversation" data-invocation="{id}"><h3>Conversation of'
                " invocation {id}</h3>{msgs}</section>",
                id=invocation_id,
                msgs=join(message_html(m, None) for m in messages),
            )
        )
    if data.conversation_items > shown:
        sections.append(
            html(
                '<p class="muted">{n} more conversation items are not shown.</p>',
                n=number(data.conversation_items - shown),
            )
        )
    if data.turns:
        sections.append(Html('<h3 id="producer-turns">Turns (ng_trajectory)</h3>'))
        sections.extend(_producer_turn(t) for t in data.turns)
        if data.turn_count > len(data.turns):
            sections.append(
                html(
                    '<p class="muted">{n} more turns are not shown.</p>',
                    n=number(data.turn_count - len(data.turns)),
                )
            )
    return join(sections)


def _producer_turn(turn: dict[str, Any]) -> Html:
    def text(name: str) -> str:
        value = turn.get(name)
        return value if isinstance(value, str) else ""

    parts = []
    if text("question"):
        parts.append(message_html(Message("user", [Part("text", text("question"))]), None))
    reasoning = [Part("reasoning", text("reasoning_content"))] if text("reasoning_content") else []
    answer = [Part("text", text("answer"))] if text("answer") else []
    if reasoning or answer:
        parts.append(message_html(Message("assistant", reasoning + answer), None))
    return html(
        '<section class="turn producer-turn" data-turn="{n}"><h4 class="turn-head">Turn {n} of'
        ' {inv} <span class="muted">{at}</span></h4>{parts}</section>',
        n=str(turn.get("turn_no")),
        inv=str(turn.get("invocation_id")),
        at=str(turn.get("timestamp") or ""),
        parts=join(parts),
    )


def tabs(rollout_id: str, current: str, calls_from: int | None = None) -> Html:
    """The views of one rollout (the same page of calls in each)."""
    views = (
        ("details", rollout_url(rollout_id) + query(calls_from=calls_from or None), "Details"),
        ("transcript", transcript_url(rollout_id, calls_from), "Transcript"),
    )
    return html(
        '<nav class="tabs" aria-label="Views of this rollout">{links}</nav>',
        links=join(
            html(
                '<a href="{h}"{cur}>{label}</a>',
                h=href,
                label=label,
                cur=Html(' aria-current="page"') if name == current else "",
            )
            for name, href, label in views
        ),
    )


def transcript_body(data: TranscriptData) -> Html:
    turns = _turns(data)
    body: Sequence[Html] = [_turn_html(data, t) for t in turns]
    if not body:
        body = [Html('<p class="muted">No model call captured.</p>')]
    return html(
        '<p><a href="/ui/">← Rollouts</a></p><h1>Rollout {id}</h1>{tabs}'
        '<p class="muted">The conversation of the captured model calls, in order: each call'
        " shows what its request adds (after what the previous request of its invocation"
        " carried, less the echo of the previous reply) and its reply. Task: {task}.</p>"
        '{pager}<div id="transcript">{turns}</div>{pager}{producer}',
        id=data.rollout_id,
        tabs=tabs(data.rollout_id, "transcript", data.calls_from),
        task=data.task_id or "–",
        pager=_pager(data),
        turns=join(body),
        producer=_producer(data),
    )
