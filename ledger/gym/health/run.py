"""A whole run: records in, digests and the quality summary out (Gym's ``run_health_checks``
without the files)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.gym.health.catalogue import normalize_ignored_checks
from ledger.gym.health.evaluate import RolloutDigest, evaluate
from ledger.gym.health.facts import RecordFacts, record_facts, unreadable_facts
from ledger.gym.health.summary import mark_duplicates, quality_summary


@dataclass(frozen=True)
class HealthReport:
    digests: list[RolloutDigest]  # input order, after the duplicate pass
    summary: dict[str, Any]
    ignored: tuple[str, ...]


def _reject_constant(name: str) -> Any:
    # Gym parses with orjson, which has no NaN/Infinity literals.
    raise ValueError(f"{name} is not JSON")


def parse_line(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """The record on a line, or the class name of the parse failure (Gym's names)."""
    try:
        parsed = json.loads(raw.strip(), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        return None, "JSONDecodeError"
    except json.JSONDecodeError:
        return None, "JSONDecodeError"
    except ValueError:
        return None, "JSONDecodeError"
    if not isinstance(parsed, dict):
        return None, "ValueError"
    return parsed, None


def facts_from_files(files: Sequence[tuple[str, Iterable[bytes]]]) -> list[RecordFacts]:
    """(name as given, physical lines) per file: blank lines are skipped but counted."""
    facts: list[RecordFacts] = []
    for file_index, (name, lines) in enumerate(files):
        for line_number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            record, error = parse_line(raw)
            if record is None:
                assert error is not None
                facts.append(
                    unreadable_facts(
                        len(facts),
                        error,
                        file_index=file_index,
                        source_file=name,
                        line_number=line_number,
                    )
                )
            else:
                facts.append(record_facts(record, len(facts)))
    return facts


def check_facts(
    facts: Iterable[RecordFacts], ignored_checks: Sequence[str] | str = ()
) -> HealthReport:
    ignored = normalize_ignored_checks(ignored_checks)
    digests = mark_duplicates([evaluate(f, ignored) for f in facts], ignored)
    return HealthReport(digests=digests, summary=quality_summary(digests, ignored), ignored=ignored)


def check_records(
    records: Iterable[dict[str, Any]], ignored_checks: Sequence[str] | str = ()
) -> HealthReport:
    """Parsed records, in order (the ledger's stored records are always objects)."""
    return check_facts(
        (record_facts(record, ordinal) for ordinal, record in enumerate(records)), ignored_checks
    )
