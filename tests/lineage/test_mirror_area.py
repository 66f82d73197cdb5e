"""The lineage mirror area, applied directly: events from a real database into a directory,
compared with what ``expected_files`` says the database implies, on every backend."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.app.areas import default_mirror_areas
from ledger.areas.lineage.mirror import LineageMirrorArea, ledger_line
from ledger.areas.lineage.service import LineageService
from ledger.gym.lineage import CommittedRow, FailureRow, build_manifest
from ledger.log.store import LedgerStore
from ledger.mirror.files import PageFiles
from tests.lineage.rows import committed_row, failure_row

ROLLOUTS = ("r1", "r2", "r3", "r4", "r5", "never")


def files_in(directory: Path) -> dict[str, bytes]:
    if not directory.exists():
        return {}
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


async def replay(
    store: LedgerStore, area: LineageMirrorArea, directory: Path, *, page: int = 1
) -> None:
    """Apply the log in pages of ``page`` events, as the follower does."""
    events = await store.events(after=0, limit=10_000)
    for start in range(0, len(events), page):
        files = PageFiles()
        for event in events[start : start + page]:
            area.apply(directory, event, files)
        files.finish()


async def expected(store: LedgerStore, area: LineageMirrorArea) -> dict[str, bytes]:
    wanted: dict[str, bytes] = {}
    async with store.read() as conn:
        for rollout_id in ROLLOUTS:
            wanted.update(await area.expected_files(conn, rollout_id))
    return dict(sorted(wanted.items()))


async def test_replayed_files_match_the_database(store: LedgerStore, tmp_path: Path) -> None:
    service = LineageService(store)
    for rollout_id in ROLLOUTS[:5]:
        root = committed_row(rollout_id, "c1")
        await service.record(rollout_id, CommittedRow.model_validate(root))
        await service.record(rollout_id, FailureRow.model_validate(failure_row("c2")))
        await service.record(
            rollout_id, CommittedRow.model_validate(committed_row(rollout_id, "c3", parent=root))
        )
    await service.retire(["r2", "r3", "never"])
    await service.record("r2", CommittedRow.model_validate(committed_row("r2", "late")))
    await service.delete(["r3", "r4"])
    await service.record("r4", CommittedRow.model_validate(committed_row("r4", "again")))

    area = LineageMirrorArea()
    directory = tmp_path / "mirror" / area.name
    await replay(store, area, directory)
    files = files_in(directory)
    assert files == await expected(store, area)
    # The same files when the whole log is one page (appends gathered, removals in order).
    whole = tmp_path / "one-page" / area.name
    await replay(store, area, whole, page=10_000)
    assert files_in(whole) == files
    assert sorted(files) == [
        "never.lineage.retired",
        "r1.lineage.jsonl",
        "r2.lineage.retired",
        "r4.lineage.jsonl",
        "r5.lineage.jsonl",
    ]
    assert files["r2.lineage.retired"] == b""

    # Gym's format: compact JSON, sorted keys, one row per line; the same manifest as the API.
    lines = files["r1.lineage.jsonl"].decode().splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line == json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"))
    from_files = build_manifest("r1", [json.loads(line) for line in lines])
    assert from_files == await service.manifest("r1")
    assert [
        json.loads(line)["model_call_id"] for line in files["r4.lineage.jsonl"].splitlines()
    ] == ["again"]


async def test_file_names_and_registration() -> None:
    area = LineageMirrorArea()
    assert area.file_names("r1") == ["r1.lineage.jsonl", "r1.lineage.retired"]
    assert any(isinstance(a, LineageMirrorArea) for a in default_mirror_areas())
    assert area.handles("ledger.row_recorded") and not area.handles("ledger.row_discarded")


def test_ledger_lines_are_byte_identical_to_gyms_json_dumps() -> None:
    row: dict[str, object] = {"response_id": "réponse-1", "model_call_id": "c1", "cum_len": 9}
    line = ledger_line(row)
    assert line == b'{"cum_len":9,"model_call_id":"c1","response_id":"r\\u00e9ponse-1"}\n'
