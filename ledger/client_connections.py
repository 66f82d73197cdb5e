"""How the ledger's own HTTP clients keep connections: an idle one is dropped before the server
would drop it.

``ledger serve`` closes a connection that sits idle after a response for
``LEDGER_KEEP_ALIVE_TIMEOUT_S`` (5 s by default). httpx keeps an idle connection for 5 s too, so
a request sent on one at that moment meets the server's close and fails with "Server
disconnected without sending a response"; httpx does not send it again (the fence race suite
met this on a loaded CI machine). Dropping idle connections after 2 s leaves the server's close
nothing to race with. Only httpx is imported: Gym's process imports this (ledger.gym_plugin).
"""

from __future__ import annotations

import httpx

IDLE_CONNECTION_EXPIRY_S = 2.0


def client_limits() -> httpx.Limits:
    """httpx's default pool sizes, with idle connections kept for 2 s instead of 5 s."""
    return httpx.Limits(
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=IDLE_CONNECTION_EXPIRY_S,
    )
