"""A minimal HTTP/1.1 keep-alive client for benchmarks.

httpx spends more CPU per request than the server under test; on a small machine the
benchmark would measure the client. This client only frames requests and reads the reply.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

# A reply slower than this is a server that stopped answering (a crashed writer, a dead
# worker): the benchmark fails saying so instead of waiting forever.
REPLY_TIMEOUT_S = 120.0


class NoReply(RuntimeError):
    """The server closed the connection or did not answer in time."""


class RawConnection:
    def __init__(self, host: str, port: int, *, timeout_s: float = REPLY_TIMEOUT_S) -> None:
        self._host = host
        self._port = port
        self._timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> RawConnection:
        self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        if self._writer is not None:
            self._writer.close()
            await self._writer.wait_closed()

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        try:
            return await asyncio.wait_for(self._request(method, path, body), self._timeout_s)
        except TimeoutError:
            raise NoReply(f"{method} {path}: no reply in {self._timeout_s:g} s") from None

    async def _request(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        assert self._reader is not None and self._writer is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self._writer.write(head.encode() + body)
        status_line = await self._reader.readline()
        if not status_line:
            raise NoReply(f"{method} {path}: the server closed the connection without a reply")
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self._reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self._reader.readexactly(length)
