"""``health_findings.verdict_line`` and ``.figures``: what a selection's summary reads of each
row, in two values instead of fourteen.

A summary fetches one row per selected record, and on this stack fetching a value costs about
as much as the Python that then uses it (~0.2 µs each): at 100,000 rows, 21 values a row were
half the answer. So the integers the summary adds up (and where the stored verdict line's
verdict and findings are) are packed into one little-endian int64 array per row, unpacked for
a whole selection at once in C (``figure_columns``), and the verdict line is stored as the
bytes it will be written as (``compact.stored_line``). The per-row columns stay beside them for
SQL and for one rollout's answer.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from typing import Any, NamedTuple

from ledger.gym.health.compact import CompactDigest, stored_line


class Figures(NamedTuple):
    """One list per figure, a value per row (the order of the packed array)."""

    policy_calls_observed: list[int]  # 0 / 1
    successful_model_calls: list[int]
    capture_observed: list[int]  # 0 / 1
    model_call_errors: list[int]
    ended_on_error: list[int]  # 0 / 1
    duplicated_calls: list[int]
    transcript_prompt_tokens: list[int]
    transcript_completion_tokens: list[int]
    capture_prompt_tokens: list[int]
    capture_completion_tokens: list[int]
    unobserved_mask: list[int]
    verdict_at: list[int]  # StoredLine's offsets (0 when the row has no stored line)
    findings_end: list[int]


_DIGEST_FIGURES = Figures._fields[:-2]
_WIDTH = len(Figures._fields)
_PACKED = struct.Struct(f"<{_WIDTH}q")


def stored_columns(digest: CompactDigest) -> dict[str, Any]:
    """The row's ``verdict_line`` and ``figures``. ``figures`` is None when a value does not
    fit an int64 (no real count does): the summary then takes its general path."""
    line = stored_line(digest)
    offsets = (0, 0) if line is None else (line.verdict_at, line.findings_end)
    values = [int(getattr(digest, name)) for name in _DIGEST_FIGURES]
    try:
        figures: bytes | None = _PACKED.pack(*values, *offsets)
    except struct.error:
        figures = None
    return {"verdict_line": None if line is None else line.text, "figures": figures}


def figure_columns(packed: Sequence[bytes | None]) -> Figures | None:
    """The rows' figures a column at a time; None if a row has none (or not of this width)."""
    if None in packed:
        return None
    joined = b"".join(packed)  # type: ignore[arg-type]  # no None: checked above
    if len(joined) != _PACKED.size * len(packed):
        return None
    values = array("q")
    values.frombytes(joined)
    if sys.byteorder == "big":
        values.byteswap()
    view = memoryview(values)
    return Figures(*(view[k::_WIDTH].tolist() for k in range(_WIDTH)))
