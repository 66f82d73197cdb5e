"""The one-shot export: a selection of rollouts to a collector, page by page."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from ledger.areas.health.findings_store import IN_CHUNK
from ledger.areas.health.selection import Selection
from ledger.areas.health.service import SyncRead
from ledger.areas.otel.mapping import MappingOptions, rollout_spans
from ledger.areas.otel.sender import OtlpSender
from ledger.areas.otel.source import ChangedRollout, rollouts_by_id, selected_rollout_ids
from ledger.areas.otel.spans import Span

ROLLOUTS_PER_READ = 200
assert ROLLOUTS_PER_READ <= IN_CHUNK


@dataclass(frozen=True)
class ExportSummary:
    rollouts: int
    spans: int


def mapped_spans(changed: Sequence[ChangedRollout], options: MappingOptions) -> list[Span]:
    """Every span of these rollouts (CPU only: callers run it off the event loop)."""
    return [span for item in changed for span in rollout_spans(item.evidence, options)]


async def send_in_batches(sender: OtlpSender, spans: Sequence[Span], batch_spans: int) -> None:
    for first in range(0, len(spans), batch_spans):
        await sender.send(spans[first : first + batch_spans])


async def export_selection(
    read_sync: SyncRead,
    sender: OtlpSender,
    selection: Selection,
    *,
    options: MappingOptions,
    batch_spans: int = 512,
    on_total: Callable[[int], None] = lambda _n: None,
    on_rollouts: Callable[[int], None] = lambda _n: None,
) -> ExportSummary:
    """Send every span of the selected rollouts (their current records, read a page at a time
    in a snapshot each). Raises ExportFailed when the collector does not take a batch."""
    ids = await read_sync(partial(selected_rollout_ids, selection=selection))
    on_total(len(ids))
    rollouts = spans = 0
    for first in range(0, len(ids), ROLLOUTS_PER_READ):
        chunk = ids[first : first + ROLLOUTS_PER_READ]
        changed = await read_sync(partial(rollouts_by_id, rollout_ids=chunk))
        page = await asyncio.to_thread(mapped_spans, changed, options)
        await send_in_batches(sender, page, batch_spans)
        rollouts += len(changed)
        spans += len(page)
        on_rollouts(len(chunk))
    return ExportSummary(rollouts, spans)
