"""Where two transcripts first differ (docs/decisions.md, "compare-divergence").

A rollout's transcript is its calls in ``call_index`` order, each call a turn: the messages its
request adds to its invocation's conversation (as the transcript tab shows them), its reply and,
for a failed call, its failure. Two turns are the same when their messages are, in order, by
role and by each part's kind and text (a tool call by its name and pretty-printed arguments, a
tool result by its text). Left out: reasoning (often dropped or encrypted), the ids a provider or
client makes up per sample (tool call ids, response ids, model call ids) and every measure
(tokens, latency, times). A failed call's part is its failure class (the status code, else the
error category), not the provider's error text. Pure functions over ``Turn``s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ledger.areas.viewer.transcript import Message, Part
from ledger.areas.viewer.transcript_page import Turn

Sign = tuple[str, tuple[tuple[str, str, str], ...]]


def message_sign(message: Message) -> Sign:
    """What of a message counts for the comparison (see the module doc)."""
    return (
        message.role,
        tuple((p.kind, p.text, p.name or "") for p in message.parts if p.kind != "reasoning"),
    )


def turn_messages(turn: Turn) -> list[Message]:
    """The turn's messages as compared: its new input, its reply, then its failure if any."""
    messages = [*turn.inputs, *turn.outputs]
    call = turn.item.call
    if turn.item.exchange.redacted:
        messages.append(Message("redacted"))
    elif call.failed:
        failure = "damaged" if call.damaged else str(call.status_code or call.error_category or "")
        messages.append(Message("failure", [Part("other", failure)]))
    return messages


@dataclass(frozen=True)
class Difference:
    """The first call whose turns differ. ``message`` is the position, in the turn's messages
    (``turn_messages``), of the first message that differs (or that one side lacks); ``None``
    when one rollout has no call at that index."""

    call_index: int
    message: int | None
    missing_in: str | None = None

    def describe(self) -> str:
        if self.missing_in is not None:
            return f"call #{self.call_index}: rollout {self.missing_in} has no such call"
        return f"call #{self.call_index}, message {(self.message or 0) + 1} of the turn"


def first_difference(
    a: Sequence[Turn], b: Sequence[Turn], *, a_ends: bool, b_ends: bool
) -> Difference | None:
    """The first difference between two runs of turns of the same call indexes. ``a_ends``
    and ``b_ends``: whether that side has no call after its last turn here (so a missing
    turn is a difference, not the end of what was read)."""
    for n in range(max(len(a), len(b))):
        if n >= len(a) or n >= len(b):
            if n >= len(a) and a_ends:
                return Difference(b[n].item.call.call_index, None, missing_in="A")
            if n >= len(b) and b_ends:
                return Difference(a[n].item.call.call_index, None, missing_in="B")
            return None
        at_a, at_b = a[n].item.call.call_index, b[n].item.call.call_index
        if at_a != at_b:  # a gap in one side's indexes: the lower index is missing in the other
            return Difference(min(at_a, at_b), None, missing_in="B" if at_a < at_b else "A")
        left, right = turn_messages(a[n]), turn_messages(b[n])
        for m in range(max(len(left), len(right))):
            if m >= len(left) or m >= len(right) or message_sign(left[m]) != message_sign(right[m]):
                return Difference(a[n].item.call.call_index, m)
    return None
