"""Which headers cross the proxy, and the credentials it puts on the way out.

Hop-by-hop headers stay on their hop. ``accept-encoding`` goes out as ``identity``: the body the
client receives is then the body the capture parses, byte for byte. The client's own
credentials go upstream unless the ledger requires its ingest token on this route (then that
token is the client's credential and is never forwarded) or the upstream has a configured key
(then that key replaces them).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from ledger.areas.proxy.upstreams import Upstream

RawHeaders = list[tuple[bytes, bytes]]

_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
_NOT_FORWARDED = _HOP_BY_HOP | {b"host", b"content-length", b"accept-encoding", b"expect"}
# The proxy's server adds its own.
_NOT_RETURNED = _HOP_BY_HOP | {b"server", b"date"}
_CREDENTIALS = frozenset({b"authorization", b"x-api-key"})


def _connection_tokens(headers: Iterable[tuple[bytes, bytes]]) -> set[bytes]:
    """Headers named by ``Connection`` are hop-by-hop too (RFC 9110 §7.6.1)."""
    tokens: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            tokens.update(token.strip().lower() for token in value.split(b","))
    return tokens


def client_presents(headers: Iterable[tuple[bytes, bytes]], token: str) -> bool:
    """The ingest token as the client's API key: ``Authorization: Bearer`` or ``x-api-key``."""
    expected_bearer = f"Bearer {token}".encode()
    expected_key = token.encode()
    matched = False
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"authorization":
            matched |= hmac.compare_digest(value, expected_bearer)
        elif lowered == b"x-api-key":
            matched |= hmac.compare_digest(value, expected_key)
    return matched


def upstream_request_headers(
    headers: RawHeaders, upstream: Upstream, *, anthropic_style: bool, strip_credentials: bool
) -> RawHeaders:
    dropped = _NOT_FORWARDED | _connection_tokens(headers)
    if strip_credentials or upstream.api_key is not None:
        dropped = dropped | _CREDENTIALS
    forwarded = [(b"host", upstream.host_header)]
    forwarded += [(name, value) for name, value in headers if name.lower() not in dropped]
    forwarded.append((b"accept-encoding", b"identity"))
    if upstream.api_key is not None:
        key = upstream.api_key.get_secret_value().encode()
        if anthropic_style:
            forwarded.append((b"x-api-key", key))
        else:
            forwarded.append((b"authorization", b"Bearer " + key))
    return forwarded


def client_response_headers(headers: Iterable[tuple[bytes, bytes]]) -> RawHeaders:
    raw = list(headers)
    dropped = _NOT_RETURNED | _connection_tokens(raw)
    return [(name, value) for name, value in raw if name.lower() not in dropped]


def single_value(headers: Iterable[tuple[bytes, bytes]], wanted: bytes) -> str | None:
    """The header's value when it has exactly one distinct (visible ASCII) value."""
    values = {value for name, value in headers if name.lower() == wanted}
    if len(values) != 1:
        return None
    value = values.pop()
    if not value or len(value) > 256 or not all(0x21 <= byte <= 0x7E for byte in value):
        return None
    return value.decode("ascii")
