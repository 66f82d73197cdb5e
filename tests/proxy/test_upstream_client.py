"""The proxy's upstream client against real loopback servers that answer with raw bytes:
framing (content-length, chunked, read-until-close, 1xx), keep-alive reuse, and each failure
as the error the forwarder maps to a Gym category."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from ledger.areas.proxy.upstream_client import (
    Origin,
    UpstreamClient,
    UpstreamConnectError,
    UpstreamProtocolError,
    UpstreamResponse,
    UpstreamTimeout,
)
from tests.support.server import free_port

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[Origin, list[int]]]:
    """A loopback server running ``handler`` per connection; yields its origin and a list
    that grows by one per connection accepted."""
    connections: list[int] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield Origin("http", "127.0.0.1", port), connections
    finally:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


def answering(*answers: bytes, close_after: bool = False) -> Handler:
    """Answer each request on a connection with the next of ``answers``."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in answers:
            await read_request(reader)
            writer.write(answer)
            await writer.drain()
        if not close_after:
            await reader.read()  # hold the connection until the client closes it

    return handler


def client(**overrides: float) -> UpstreamClient:
    options = {"connect_timeout_s": 2.0, "read_timeout_s": 2.0, "max_connections": 4}
    options.update(overrides)
    return UpstreamClient(
        connect_timeout_s=options["connect_timeout_s"],
        read_timeout_s=options["read_timeout_s"],
        max_connections=int(options["max_connections"]),
    )


async def body_of(response: UpstreamResponse) -> bytes:
    try:
        return b"".join([chunk async for chunk in response.aiter_raw()])
    finally:
        await response.aclose()


async def post(upstream: UpstreamClient, origin: Origin, body: bytes = b"{}") -> UpstreamResponse:
    headers = [(b"host", b"upstream"), (b"content-type", b"application/json")]
    return await upstream.send(b"POST", origin, b"/v1/chat/completions", headers, body)


OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


async def test_keep_alive_connection_is_reused_for_the_next_request() -> None:
    async with raw_server(answering(OK, OK)) as (origin, connections):
        upstream = client()
        assert await body_of(await post(upstream, origin)) == b"{}"
        assert await body_of(await post(upstream, origin)) == b"{}"
        await upstream.aclose()
    assert len(connections) == 1


async def test_the_request_goes_out_with_its_body_and_length() -> None:
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head + await reader.readexactly(len(b'{"a": 1}')))
        writer.write(OK)
        await reader.read()

    async with raw_server(handler) as (origin, _):
        upstream = client()
        await body_of(await post(upstream, origin, b'{"a": 1}'))
        await upstream.aclose()
    [request] = seen
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nhost: upstream\r\n" in request
    assert b"\r\ncontent-length: 8\r\n" in request
    assert request.endswith(b'\r\n\r\n{"a": 1}')


async def test_chunked_answer_arrives_chunk_by_chunk_and_the_connection_is_kept() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        b"6\r\ndata: \r\n3\r\nx\n\n\r\n0\r\n\r\n"
    )
    async with raw_server(answering(chunked, OK)) as (origin, connections):
        upstream = client()
        response = await post(upstream, origin)
        assert response.status_code == 200
        assert response.header(b"content-type") == b"text/event-stream"
        chunks = [chunk async for chunk in response.aiter_raw()]
        await response.aclose()
        assert chunks == [b"data: ", b"x\n\n"]
        assert await body_of(await post(upstream, origin)) == b"{}"
        await upstream.aclose()
    assert len(connections) == 1


async def test_answer_read_until_close_is_whole_and_not_reused() -> None:
    until_close = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + b'{"a": 1}'
    async with raw_server(answering(until_close, close_after=True)) as (origin, connections):
        upstream = client()
        assert await body_of(await post(upstream, origin)) == b'{"a": 1}'
        # The first answer ended with its connection: the second goes out on a new one.
        assert await body_of(await post(upstream, origin)) == b'{"a": 1}'
        await upstream.aclose()
    assert len(connections) == 2


async def test_informational_answers_are_skipped() -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n" + OK
    async with raw_server(answering(early)) as (origin, _):
        upstream = client()
        response = await post(upstream, origin)
        assert response.status_code == 200
        assert await body_of(response) == b"{}"
        await upstream.aclose()


async def test_header_case_and_order_are_kept() -> None:
    answer = (
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nX-Req: a\r\ncontent-length: 0\r\n\r\n"
    )
    async with raw_server(answering(answer)) as (origin, _):
        upstream = client()
        response = await post(upstream, origin)
        assert response.status_code == 429
        assert response.headers[:2] == [(b"Retry-After", b"1"), (b"X-Req", b"a")]
        assert await body_of(response) == b""
        await upstream.aclose()


async def test_unreachable_upstream_is_a_connect_error() -> None:
    upstream = client()
    with pytest.raises(UpstreamConnectError):
        await post(upstream, Origin("http", "127.0.0.1", free_port()))
    await upstream.aclose()


async def test_silent_upstream_is_a_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with raw_server(silent) as (origin, _):
        upstream = client(read_timeout_s=0.3)
        with pytest.raises(UpstreamTimeout):
            await post(upstream, origin)
        await upstream.aclose()


async def test_stall_mid_body_is_a_timeout() -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc"
    async with raw_server(answering(head)) as (origin, _):
        upstream = client(read_timeout_s=0.3)
        response = await post(upstream, origin)
        with pytest.raises(UpstreamTimeout):
            await body_of(response)
        await upstream.aclose()


async def test_body_cut_short_is_a_protocol_error() -> None:
    cut = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc"
    async with raw_server(answering(cut, close_after=True)) as (origin, _):
        upstream = client()
        response = await post(upstream, origin)
        with pytest.raises(UpstreamProtocolError):
            await body_of(response)
        await upstream.aclose()


async def test_close_without_an_answer_is_a_protocol_error() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    async with raw_server(hang_up) as (origin, _):
        upstream = client()
        with pytest.raises(UpstreamProtocolError):
            await post(upstream, origin)
        await upstream.aclose()


async def test_not_http_is_a_protocol_error() -> None:
    async with raw_server(answering(b"SSH-2.0-OpenSSH\r\n\r\n")) as (origin, _):
        upstream = client()
        with pytest.raises(UpstreamProtocolError):
            await post(upstream, origin)
        await upstream.aclose()


async def test_connection_the_upstream_closed_while_idle_is_not_reused() -> None:
    async with raw_server(answering(OK, close_after=True)) as (origin, connections):
        upstream = client()
        assert await body_of(await post(upstream, origin)) == b"{}"
        await asyncio.sleep(0.2)  # poll: a pause so the FIN arrives while idle
        assert await body_of(await post(upstream, origin)) == b"{}"
        await upstream.aclose()
    assert len(connections) == 2


async def test_at_most_max_connections_are_open_and_a_waiter_gets_a_freed_one() -> None:
    release = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            await release.wait()
            writer.write(OK)
            await writer.drain()

    async with raw_server(slow) as (origin, connections):
        upstream = client(max_connections=1)
        first = asyncio.create_task(post(upstream, origin))
        second = asyncio.create_task(post(upstream, origin))
        await asyncio.sleep(0.2)  # poll: time for a wrong second connection
        assert len(connections) == 1 and not first.done() and not second.done()
        release.set()
        assert await body_of(await first) == b"{}"
        assert await body_of(await second) == b"{}"
        await upstream.aclose()
    assert len(connections) == 1
