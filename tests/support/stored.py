"""What a database holds after a load: read back through a store of its own."""

from __future__ import annotations

from sqlalchemy import select

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.areas.captures.tables import capture_calls
from ledger.log.store import LedgerStore


async def stored_calls(database_url: str) -> dict[str, list[tuple[int, int]]]:
    """model_call_id -> every (seq, call_index) stored for it."""
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        async with store.read() as conn:
            rows = await conn.execute(
                select(
                    capture_calls.c.model_call_id, capture_calls.c.seq, capture_calls.c.call_index
                )
            )
            stored: dict[str, list[tuple[int, int]]] = {}
            for model_call_id, seq, call_index in rows:
                stored.setdefault(model_call_id, []).append((seq, call_index))
            return stored
    finally:
        await store.close()
