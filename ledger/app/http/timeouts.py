"""A body read deadline as pure ASGI middleware: a request has ``seconds`` from its first
``receive`` to deliver its whole body, or it is answered 408 and its connection closed.

uvicorn has no such timeout: a client trickling one byte at a time would hold a request (and
its memory) for as long as it likes. A client that disconnects before its body is complete
ends its request quietly: nobody is left to answer, and uvicorn would log the disconnect as an
"Exception in ASGI application" with a traceback (a slowloris client could fill the log).
"""

from __future__ import annotations

import asyncio

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ledger.app.http.middleware_replies import send_detail


class _BodyTimedOut(HTTPException):
    """Raised from ``receive``; an HTTPException so FastAPI's body reading passes it through."""

    def __init__(self, seconds: float) -> None:
        super().__init__(408, f"request body not received within {seconds:g} s")


class BodyReadTimeout:
    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        body_done = False
        started = False

        async def timed_receive() -> Message:
            nonlocal deadline, body_done
            if body_done:
                # After the body only a disconnect can come: wait for it as long as it takes.
                return await receive()
            if deadline is None:
                deadline = loop.time() + self.seconds
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise _BodyTimedOut(self.seconds) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, timed_receive, tracking_send)
        except _BodyTimedOut as exc:
            if not started:
                await _reply_408(send, exc.detail)
        except ClientDisconnect:
            if started:
                raise


async def _reply_408(send: Send, detail: str) -> None:
    await send_detail(send, 408, detail, [(b"connection", b"close")])
