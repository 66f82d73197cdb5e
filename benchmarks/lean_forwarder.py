"""The leanest Python forwarder doing the proxy's job, no capture: the bench's ceiling.

``python -m benchmarks.lean_forwarder --port P --upstream http://127.0.0.1:U``. Raw asyncio on
uvloop: read a request (headers, then its content-length body), forward it over a pooled
keep-alive connection to the upstream, relay the answer as it arrives (a content-length body
in one write, a chunked one chunk by chunk with its framing as is), return the connection to
the pool. No ASGI, no header filtering, no capture: whatever ``ledger serve`` adds beyond this
is the ledger's; what this adds is what a Python hop costs on this machine.

It speaks just enough HTTP/1.1 for the bench's traffic (the fake upstream's answers); it is a
measuring stick, not a proxy to use.
"""

from __future__ import annotations

import argparse
import asyncio
from urllib.parse import urlsplit

import uvloop

Pool = list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]


def _headers(block: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """The start line and the headers (lower-cased names) of a header block."""
    lines = block.split(b"\r\n")
    fields: dict[bytes, bytes] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
    return lines[0], fields


async def _relay_answer(upstream: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
    head = await upstream.readuntil(b"\r\n\r\n")
    _, fields = _headers(head)
    if b"content-length" in fields:
        body = await upstream.readexactly(int(fields[b"content-length"]))
        client.write(head + body)
        return
    client.write(head)  # chunked: relay each chunk with its framing as it arrives
    while True:
        size_line = await upstream.readline()
        size = int(size_line.split(b";")[0], 16)
        chunk = await upstream.readexactly(size + 2)
        client.write(size_line + chunk)
        if size == 0:
            return
        await client.drain()


async def _serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    pool: Pool,
    host: str,
    port: int,
) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            _, fields = _headers(head)
            body = await reader.readexactly(int(fields.get(b"content-length", b"0")))
            while pool and pool[-1][0].at_eof():  # closed by the upstream while idle
                pool.pop()[1].close()
            upstream = pool.pop() if pool else await asyncio.open_connection(host, port)
            upstream[1].write(head + body)
            try:
                await _relay_answer(upstream[0], writer)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise
                # It closed as we sent (its keep-alive ran out): once more on a new one.
                upstream[1].close()
                upstream = await asyncio.open_connection(host, port)
                upstream[1].write(head + body)
                await _relay_answer(upstream[0], writer)
            pool.append(upstream)
            await writer.drain()
    finally:
        writer.close()


async def _main(port: int, upstream_url: str) -> None:
    target = urlsplit(upstream_url)
    assert target.hostname is not None and target.port is not None
    pool: Pool = []
    server = await asyncio.start_server(
        lambda r, w: _serve_connection(r, w, pool, target.hostname or "", target.port or 80),
        "127.0.0.1",
        port,
    )
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    uvloop.run(_main(args.port, args.upstream))


if __name__ == "__main__":
    main()
