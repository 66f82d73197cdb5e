"""``ledger import --lineage-dir``: Gym's lineage ledgers and fences into the ledger.

Reads ``<id>.lineage.jsonl`` (rows in file order) and ``<id>.lineage.retired`` (fences) from a
Gym token-capture directory. Each rollout is one writer command, so a rollout is imported whole
or not at all; re-running adds nothing (identical rows are duplicates, fenced rollouts are left
alone). Lines that are not ledger rows are skipped and reported, never guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.areas.lineage import queries as commands
from ledger.gym.finite_json import loads_finite
from ledger.gym.ids import is_valid_rollout_id
from ledger.gym.lineage import check_stored_row
from ledger.log.store import LedgerStore
from ledger.log.transaction import WriteTransaction

LEDGER_SUFFIX = ".lineage.jsonl"
FENCE_SUFFIX = ".lineage.retired"


@dataclass
class LineageImportReport:
    rollouts: int = 0
    rows_recorded: int = 0
    rows_already_present: int = 0
    fences_written: int = 0
    fences_already_present: int = 0
    skipped: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"lineage: {self.rollouts} rollouts, {self.rows_recorded} rows recorded, "
            f"{self.rows_already_present} already present, {self.fences_written} fences "
            f"written, {self.fences_already_present} already present, "
            f"{len(self.skipped)} skipped"
        )


@dataclass
class _GymLedger:
    rows: list[dict[str, Any]] = field(default_factory=list)
    fenced: bool = False


def _scan(directory: Path, report: LineageImportReport) -> dict[str, _GymLedger]:
    found: dict[str, _GymLedger] = {}
    for path in sorted(directory.iterdir()):
        for suffix in (LEDGER_SUFFIX, FENCE_SUFFIX):
            if path.name.endswith(suffix) and path.is_file():
                rollout_id = path.name[: -len(suffix)]
                if not is_valid_rollout_id(rollout_id):
                    report.skipped.append(f"{path.name}: Invalid rollout id: {rollout_id!r}")
                    break
                ledger = found.setdefault(rollout_id, _GymLedger())
                if suffix == FENCE_SUFFIX:
                    ledger.fenced = True
                else:
                    ledger.rows = _read_rows(path, report)
                break
    return found


def _read_rows(path: Path, report: LineageImportReport) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                row = loads_finite(raw)
                if not isinstance(row, dict):
                    raise ValueError("not a JSON object")
                check_stored_row(row)
            except ValueError as exc:  # JSON and validation errors are both ValueErrors
                first_line = str(exc).splitlines()[0]
                report.skipped.append(f"{path.name}:{number}: {first_line}")
                continue
            rows.append(row)
    return rows


async def import_lineage_dir(
    store: LedgerStore,
    directory: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> LineageImportReport:
    report = LineageImportReport()
    ledgers = _scan(directory, report)
    for done, (rollout_id, ledger) in enumerate(sorted(ledgers.items()), start=1):

        def command(tx: WriteTransaction, rid: str = rollout_id, gym: _GymLedger = ledger) -> Any:
            return commands.import_ledger(tx, rid, gym.rows, fence=gym.fenced)

        size = sum(len(json.dumps(row)) for row in ledger.rows)
        result: commands.ImportedLedger = await store.execute(command, size_hint=size)
        report.rollouts += 1
        report.rows_recorded += result.recorded
        report.rows_already_present += result.duplicates
        report.fences_written += int(result.fenced)
        report.fences_already_present += int(result.already_fenced)
        report.skipped.extend(f"{rollout_id}: {message}" for message in result.conflicts)
        if progress is not None:
            progress(done, len(ledgers))
    return report
