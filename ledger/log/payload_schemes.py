"""Which canonical scheme (``canonical.STANDARD`` or ``canonical.ORJSON``) wrote an event's
payload: the log keeps the ranges of seq written by ``ORJSON`` in ``log_identity``.

Revision 0020 opens a range at the head of the log plus one when it is applied (seq 1 on a new
log): every event appended since is written by ``ORJSON``, since the code that appends is the
code of that revision or later (a server refuses a database at another revision). Downgrading
past it closes the range at the head, because the code before it writes ``STANDARD`` again; an
upgrade after that opens another. Each range is one row: ``name`` is
``orjson_payloads_from:<first seq>``, ``value`` the last seq of the range or ``open``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import inspect, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ledger.log.canonical import ORJSON, STANDARD
from ledger.log.tables import log_identity

# As revision 0020 writes them.
RANGE_PREFIX = "orjson_payloads_from:"
OPEN = "open"


@dataclass(frozen=True)
class SchemeRanges:
    """The ranges of seq (first, last; last None while open) written by ``ORJSON``."""

    orjson: Sequence[tuple[int, int | None]]

    def scheme_of(self, seq: int) -> int:
        for first, last in self.orjson:
            if seq >= first and (last is None or seq <= last):
                return ORJSON
        return STANDARD


async def read_scheme_ranges(conn: AsyncConnection) -> SchemeRanges:
    """The log's ranges; none on a log before revision 0020 (every event ``STANDARD``), which
    before revision 0006 has no ``log_identity`` at all."""
    if not await conn.run_sync(lambda sync: inspect(sync).has_table(log_identity.name)):
        return SchemeRanges([])
    rows = await conn.execute(
        select(log_identity.c.name, log_identity.c.value).where(
            log_identity.c.name.startswith(RANGE_PREFIX)
        )
    )
    ranges = [
        (int(name.removeprefix(RANGE_PREFIX)), None if value == OPEN else int(value))
        for name, value in rows
    ]
    return SchemeRanges(sorted(ranges))
