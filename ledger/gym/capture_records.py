"""Capture lines to ModelCallRecords with Gym's two reading rules (contract §2.3, §2.7)."""

from __future__ import annotations

from collections.abc import Iterable

from ledger.gym.capture_lines import parse_capture_text, parse_capture_text_strict
from ledger.gym.model_calls import ModelCallRecord, build_model_call_record


def read_available_records(lines: Iterable[str | bytes]) -> tuple[list[ModelCallRecord], int]:
    """Tolerant read: ``(records, damaged_count)``.

    ``call_index`` is the line position (damaged lines consume one); a line that is not a JSON
    object, or an exchange that fails to build a record, counts as damaged.
    """
    exchanges, damaged = parse_capture_text(lines)
    records: list[ModelCallRecord] = []
    for position, exchange in exchanges:
        try:
            records.append(build_model_call_record(exchange, position))
        except ValueError:
            damaged += 1
    return records, damaged


def read_records_strict(lines: Iterable[str | bytes]) -> list[ModelCallRecord]:
    """Strict read: ``call_index`` enumerates non-blank lines; a bad line raises ValueError."""
    return [
        build_model_call_record(exchange, index)
        for index, exchange in enumerate(parse_capture_text_strict(lines))
    ]
