"""The chain's canonical header is exactly the canonical JSON of the envelope."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ledger.log.canonical import standard_json
from ledger.log.chain import canonical_header, format_recorded_at

AWKWARD = [
    None,
    "",
    "plain",
    'quote " and backslash \\',
    "slash / and tab \t newline \n nul \x00 bell \x07 del \x7f",
    "ünïcödé ☃ \u2028 \u2029 𝄞",
    "</script>",
]


@pytest.mark.parametrize("text", AWKWARD)
@pytest.mark.parametrize("number", [0, 1, 2**53 + 1, 2**63 - 1])
def test_canonical_header_equals_standard_json(text: str | None, number: int) -> None:
    recorded_at = datetime(2026, 11, 29, 23, 59, 58, 7, tzinfo=UTC)
    kind = text or "kind"
    header = canonical_header(
        seq=number,
        recorded_at=recorded_at,
        kind=kind,
        schema_version=number,
        rollout_id=text,
        generation=number,
        idempotency_key=text,
    )
    envelope = {
        "seq": number,
        "recorded_at": format_recorded_at(recorded_at),
        "kind": kind,
        "schema_version": number,
        "rollout_id": text,
        "generation": number,
        "idempotency_key": text,
    }
    assert header == standard_json(envelope).encode()
