"""A request-body size limit as pure ASGI middleware: 413 before the body is buffered whole.

The 413 closes the connection (``Connection: close``): kept alive, the server would go on
reading and discarding the rest of the oversized body, work on the event loop that every
other request (``/healthz`` too) waits behind while a client streams megabytes it will never
accept. A client still sending may see the close before the answer (docs/decisions.md).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ledger.app.http.middleware_replies import send_detail


class _TooLarge(HTTPException):
    """Raised from ``receive``; an HTTPException so FastAPI's body parsing passes it through."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body exceeds the limit of {max_bytes} bytes")


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length, or None when it has none (or not a number)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class BodySizeLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, send: Send) -> None:
        detail = f"request body exceeds the limit of {self.max_bytes} bytes"
        await send_detail(send, 413, detail, [(b"connection", b"close")])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        started = False
        exceeded = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise _TooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if exceeded:  # the 413 the error handlers made of _TooLarge: close, as above
                    headers = [*message.get("headers", []), (b"connection", b"close")]
                    message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._reject(send)
