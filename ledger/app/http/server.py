"""How ``ledger serve`` runs uvicorn: its connection limits, and a header deadline uvicorn lacks.

uvicorn closes idle keep-alive connections but starts no timer on a fresh connection, and its
httptools parser bounds no header size: a client that opens a connection and trickles (or
never sends) its headers holds a socket forever, and enough of them make the process run out
of file descriptors (``/healthz`` stops answering). ``HeaderDeadline`` gives every connection
``header_timeout`` seconds, from its start or the end of its previous response, to deliver
the next request's headers, and at most ``max_header_bytes`` of them; otherwise it is closed.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ledger.app.config import Settings


class HeaderDeadline:
    """Mixed into uvicorn's protocol classes (before them in the MRO)."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    def __init__(
        self, *args: Any, header_timeout: float, max_header_bytes: int, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._header_timeout = header_timeout
        self._max_header_bytes = max_header_bytes
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0

    def _awaiting_headers(self) -> bool:
        return self.cycle is None or bool(self.cycle.response_complete)

    def _arm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_bytes = 0
        self._header_timer = self.loop.call_later(self._header_timeout, self._header_time_up)

    def _header_time_up(self) -> None:
        self._header_timer = None
        if self._awaiting_headers() and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        awaiting = self._awaiting_headers()
        super().data_received(data)  # type: ignore[misc]
        if not awaiting or not self._awaiting_headers():
            return
        self._header_bytes += len(data)
        if self._header_bytes > self._max_header_bytes and not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():
            self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)  # type: ignore[misc]


class HttpToolsWithHeaderDeadline(HeaderDeadline, HttpToolsProtocol):
    """uvicorn's own choice when httptools is installed (a dependency: it is faster)."""


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of ``uvicorn.run`` that bound what a client can hold."""
    # A partial of a module-level class: picklable, so ``--workers N`` can hand it on.
    protocol = functools.partial(
        HttpToolsWithHeaderDeadline,
        header_timeout=settings.header_timeout_s,
        max_header_bytes=settings.max_header_bytes,
    )
    return {
        "http": protocol,
        "timeout_keep_alive": settings.keep_alive_timeout_s,
        "limit_concurrency": settings.max_connections,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
    }
