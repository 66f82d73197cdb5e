"""What the follower has already sent, so a rollout that changes sends only its new and changed
spans: its new calls and tools, and the rollout and invocation spans whose window or totals
moved, not every span again at every change.

Bounded: the traces sent most recently, each a digest per span. A trace it no longer holds (or
any, after a restart) is sent whole again, which a backend keeping one span per id takes as a
repeat: at least once, never lost.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

from ledger.areas.otel.spans import Span

DEFAULT_TRACES = 4096


def span_digest(span: Span) -> bytes:
    # The dataclass's repr spells every field, attributes and events in their (deterministic)
    # mapping order.
    return hashlib.blake2b(repr(span).encode(), digest_size=8).digest()


class SentSpans:
    def __init__(self, traces: int = DEFAULT_TRACES) -> None:
        self._traces = traces
        self._sent: OrderedDict[bytes, dict[bytes, bytes]] = OrderedDict()

    def unsent(self, spans: Sequence[Span]) -> list[tuple[Span, bytes]]:
        """The spans not sent yet as they are now, each with its digest."""
        fresh = []
        for span in spans:
            digest = span_digest(span)
            held = self._sent.get(span.trace_id)
            if held is None or held.get(span.span_id) != digest:
                fresh.append((span, digest))
        return fresh

    def remember(self, sent: Sequence[tuple[Span, bytes]]) -> None:
        """Call once the collector has taken them."""
        for span, digest in sent:
            held = self._sent.get(span.trace_id)
            if held is None:
                held = self._sent[span.trace_id] = {}
            else:
                self._sent.move_to_end(span.trace_id)
            held[span.span_id] = digest
        while len(self._sent) > self._traces:
            self._sent.popitem(last=False)
