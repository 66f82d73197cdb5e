"""Routes served in front of the app's own middleware and router, still behind the Host
allow-list.

A model call through the capture proxy is latency on someone else's critical path: each layer
between uvicorn and the forwarder (body limit, body deadline, exception handling, the router's
scan of every route) wraps ``send`` and ``receive`` in another Python call per message, and
together they cost about as much CPU as the forwarding itself (docs/benchmarks.md). A front
route is a plain ASGI endpoint that claims its requests by path and does that work itself: it
must bound and time its own body reads (the proxy's forwarder does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.types import ASGIApp, Receive, Scope, Send


class FrontRoute(Protocol):
    def claims(self, scope: Scope) -> bool:
        """This HTTP request is this route's (decided from the scope alone, cheaply)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


class FrontDoor:
    """ASGI middleware: a request a front route claims goes to it; anything else goes on."""

    def __init__(self, app: ASGIApp, *, routes: Sequence[FrontRoute]) -> None:
        self.app = app
        self._routes = tuple(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self._routes:
                if route.claims(scope):
                    await route(scope, receive, send)
                    return
        await self.app(scope, receive, send)
