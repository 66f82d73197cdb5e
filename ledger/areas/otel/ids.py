"""Deterministic trace and span ids: the same rollout always maps to the same ids, so a
backend that keeps one span per id (Phoenix does) replaces a re-exported span instead of
showing it twice."""

from __future__ import annotations

import hashlib

_NAMESPACE = b"rollout-ledger/otel/"


def _digest(*parts: str) -> bytes:
    # Length-prefixed, so no two part lists share an encoding ("a|b", "c" vs "a", "b|c").
    hasher = hashlib.sha256(_NAMESPACE)
    for part in parts:
        encoded = part.encode()
        hasher.update(len(encoded).to_bytes(4, "big"))
        hasher.update(encoded)
    return hasher.digest()


def _non_zero(value: bytes) -> bytes:
    """OTLP reads an all-zero id as "no id"."""
    return value if any(value) else value[:-1] + b"\x01"


def trace_id(rollout_id: str, generation: int) -> bytes:
    """One trace per generation of a rollout (a deleted rollout's next generation is another
    trace, as it is another attempt)."""
    return _non_zero(_digest("trace", rollout_id, str(generation))[:16])


def span_id(rollout_id: str, generation: int, kind: str, key: str) -> bytes:
    """A span of the rollout: ``kind`` names what it maps (rollout, invocation, call, tool)
    and ``key`` which one (an invocation or tool call id, a call's index)."""
    return _non_zero(_digest("span", rollout_id, str(generation), kind, key)[:8])
