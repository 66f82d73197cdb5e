"""Where a proxied request goes: the rollout it belongs to, the upstream, the dialect.

Paths are read from the raw request target, one segment at a time, so a percent-encoded slash
stays inside its segment and cannot move the routing. The grammar is
``[/ng-rollout/<rollout_id>][/upstreams/<name>]/v1/<rest>``. A rollout id outside Gym's charset
(CRLF, a slash, anything non-ASCII after percent-decoding...) is the client's mistake: the call
is refused (400) and goes nowhere, so the id never reaches a header, a log line or a file name;
the refusal names it only escaped (``repr``), inside a JSON body.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, unquote_to_bytes

from ledger.gym.dialects import ROLLOUT_PATH_PREFIX, Dialect, dialect_of_path
from ledger.gym.ids import is_valid_rollout_id

_PREFIX = ROLLOUT_PATH_PREFIX.encode()
_UPSTREAMS = b"upstreams"


class TargetNotFound(ValueError):
    """No proxy route has this shape (the message is safe to echo: it names no input)."""


@dataclass(frozen=True)
class Target:
    # The Gym-charset rollout id, or None: unprefixed, or the prefix carried an invalid id.
    rollout_id: str | None
    # The prefix's id when it is outside Gym's charset, percent-decoded (the call is refused).
    invalid_rollout_id: str | None
    # The upstream segment as given (percent-decoded), or None for the default upstream.
    upstream: str | None
    # ``/v1/...`` exactly as the client sent it (still percent-encoded).
    raw_path: bytes
    dialect: Dialect | None


def _decoded_segment(segment: bytes) -> str | None:
    decoded = unquote_to_bytes(segment)
    return decoded.decode("ascii") if decoded.isascii() else None


def parse_target(raw_path: bytes) -> Target:
    path = raw_path.split(b"?", 1)[0]
    segments = path.split(b"/")
    if segments[0] != b"":
        raise TargetNotFound("not a proxy path")
    position = 1
    rollout_id: str | None = None
    invalid: str | None = None
    if len(segments) > position and segments[position] == _PREFIX:
        if len(segments) <= position + 1:
            raise TargetNotFound("expected /ng-rollout/<rollout_id>/...")
        candidate = _decoded_segment(segments[position + 1])
        if candidate is not None and is_valid_rollout_id(candidate):
            rollout_id = candidate
        else:
            decoded = unquote_to_bytes(segments[position + 1])
            invalid = decoded.decode("utf-8", errors="backslashreplace")
        position += 2
    upstream: str | None = None
    if len(segments) > position and segments[position] == _UPSTREAMS:
        if len(segments) <= position + 1:
            raise TargetNotFound("expected /upstreams/<name>/v1/...")
        upstream = _decoded_segment(segments[position + 1]) or ""
        position += 2
    if len(segments) <= position + 1 or segments[position] != b"v1":
        raise TargetNotFound("expected [/ng-rollout/<rollout_id>][/upstreams/<name>]/v1/...")
    rest = b"/" + b"/".join(segments[position:])
    dialect = dialect_of_path(unquote(rest.decode("latin-1")))
    return Target(
        rollout_id=rollout_id,
        invalid_rollout_id=invalid,
        upstream=upstream,
        raw_path=rest,
        dialect=dialect,
    )
