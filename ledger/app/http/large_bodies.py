"""Large request bodies take turns: a budget of bytes that large bodies in flight share.

A parsed JSON body costs many times its text in memory (a short string or integer is a Python
object of 30-60 bytes), so four clients each sending a body at the limit would cost four times
what one does. A request whose body is large (over ``LARGE_BODY_BYTES``, by its declared
length; a chunked body, whose length is unknown, counts as the limit) waits, before anything
reads its body, until its bytes fit in the budget beside the large bodies already in flight,
and holds them until its answer is sent. Waiting costs only the server's read buffer of that
connection: its body stays in the client's socket.

Small bodies, the usual captures and rows, never wait: they do not count against the budget, so
a large upload cannot stall them. Large bodies are served first come, first served, so a body at
the limit is not starved by smaller large ones. A body that has waited ``MAX_WAIT_S`` is
answered 503 with ``Retry-After``: the client may try again, nothing was read or stored.
"""

from __future__ import annotations

import asyncio
from collections import deque

from starlette.types import ASGIApp, Receive, Scope, Send

from ledger.app.http.limits import declared_length
from ledger.app.http.middleware_replies import send_detail

# Bodies up to this size are not counted (a capture is a few KiB, a batch of 100 a few hundred).
LARGE_BODY_BYTES = 1024 * 1024
MAX_WAIT_S = 60.0
RETRY_AFTER_S = 5


class ByteBudget:
    """A first-come, first-served budget of bytes (an asyncio semaphore with weights)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def acquire(self, amount: int) -> None:
        """Wait until ``amount`` (at most the capacity) fits; in arrival order."""
        amount = min(amount, self.capacity)
        if not self._waiting and self.in_use + amount <= self.capacity:
            self.in_use += amount
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((amount, turn))
        try:
            await turn
        except BaseException:
            if turn.done() and not turn.cancelled():
                self.release(amount)  # granted just as the wait was given up
            else:
                self._waiting.remove((amount, turn))
                self._grant()
            raise

    def release(self, amount: int) -> None:
        self.in_use -= min(amount, self.capacity)
        self._grant()

    def _grant(self) -> None:
        while self._waiting:
            amount, turn = self._waiting[0]
            if self.in_use + amount > self.capacity:
                return
            self._waiting.popleft()
            self.in_use += amount
            turn.set_result(None)


class LargeBodyBudget:
    """ASGI middleware: large bodies share ``budget_bytes`` (at least the body limit)."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, budget_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.budget = ByteBudget(max(budget_bytes, max_body_bytes))

    def _size(self, scope: Scope) -> int:
        """What the request counts against the budget (0: it does not)."""
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            return 0
        length = declared_length(scope)
        if length is None:
            chunked = any(
                name == b"transfer-encoding" and b"chunked" in value.lower()
                for name, value in scope.get("headers", [])
            )
            return self.max_body_bytes if chunked else 0
        return length if length > LARGE_BODY_BYTES else 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        size = self._size(scope)
        if size == 0:
            await self.app(scope, receive, send)
            return
        try:
            await asyncio.wait_for(self.budget.acquire(size), MAX_WAIT_S)
        except TimeoutError:
            await _busy(send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.budget.release(size)


async def _busy(send: Send) -> None:
    detail = (
        f"too many large request bodies in flight; waited {MAX_WAIT_S:.0f} s, "
        f"retry after {RETRY_AFTER_S} s"
    )
    await send_detail(send, 503, detail, [(b"retry-after", str(RETRY_AFTER_S).encode())])
