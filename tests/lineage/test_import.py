"""``ledger import --lineage-dir``: Gym ledgers and fences in, idempotently, on every backend."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.cli.main import main
from ledger.areas.lineage.service import LineageService
from ledger.gym.lineage import RolloutManifest, build_manifest
from ledger.log.errors import RolloutRetiredError
from ledger.log.store import LedgerStore
from tests.lineage.rows import committed_row, failure_row


def gym_line(row: dict[str, object]) -> str:
    return json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n"


def write_gym_dir(directory: Path) -> dict[str, list[dict[str, object]]]:
    directory.mkdir()
    root = committed_row("r1", "c1")
    ledgers: dict[str, list[dict[str, object]]] = {
        "r1": [root, failure_row("c2"), committed_row("r1", "c3", parent=root)],
        "r2": [{"model_call_id": "c0", "fingerprint": "f", "context_len": 1}],
    }
    for rollout_id, rows in ledgers.items():
        text = "".join(gym_line(row) for row in rows)
        (directory / f"{rollout_id}.lineage.jsonl").write_text(text)
    # A damaged line between good ones is skipped and reported.
    with (directory / "r2.lineage.jsonl").open("a") as handle:
        handle.write("{not json\n\n")
        # Python's json reads these; they are not JSON numbers, and not stored.
        handle.write(gym_line(committed_row("r2", "c6")).replace("}", ',"x":NaN}', 1))
        handle.write(gym_line(committed_row("r2", "c7")).replace("}", ',"x":1e999}', 1))
        handle.write(gym_line(committed_row("r2", "c5")))
    (directory / "r3.lineage.retired").touch()  # a fence only
    # A crash between Gym's retire phases leaves the fence AND the ledger.
    (directory / "r4.lineage.jsonl").write_text(gym_line(committed_row("r4", "c1")))
    (directory / "r4.lineage.retired").touch()
    (directory / ".hidden.lineage.jsonl").write_text(gym_line(committed_row("x", "c1")))
    (directory / "notes.txt").write_text("not a ledger")
    return ledgers


def run_import(database_url: str, directory: Path) -> str:
    result = CliRunner().invoke(
        main, ["import", "--database-url", database_url, "--lineage-dir", str(directory)]
    )
    assert result.exit_code == 0, result.output
    return result.output


async def imported_state(database_url: str) -> tuple[int, dict[str, object]]:
    """The head seq, and each rollout's manifest (or "retired")."""
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        service = LineageService(store)
        manifests: dict[str, object] = {}
        for rollout_id in ("r1", "r2", "r3", "r4"):
            try:
                manifests[rollout_id] = await service.manifest(rollout_id)
            except RolloutRetiredError:
                manifests[rollout_id] = "retired"
        return await store.head_seq(), manifests
    finally:
        await store.close()


def test_import_is_faithful_and_idempotent(database_url: str, tmp_path: Path) -> None:
    gym = tmp_path / "gym"
    ledgers = write_gym_dir(gym)
    output = run_import(database_url, gym)
    assert "lineage: 4 rollouts, 6 rows recorded, 0 already present, 2 fences written" in output
    assert "r2.lineage.jsonl:2" in output and ".hidden.lineage.jsonl" in output
    assert "r2.lineage.jsonl:4: NaN is not JSON" in output, output
    assert "r2.lineage.jsonl:5: 1e999 is beyond the range of a float" in output, output

    head, manifests = asyncio.run(imported_state(database_url))
    assert manifests["r1"] == build_manifest("r1", ledgers["r1"])
    r2 = manifests["r2"]
    assert isinstance(r2, RolloutManifest)
    assert [r.model_call_id for r in r2.records] == ["c5"]  # the lineage-only row is ignored
    assert (manifests["r3"], manifests["r4"]) == ("retired", "retired")

    again = run_import(database_url, gym)
    assert "0 rows recorded, 6 already present, 0 fences written, 2 already present" in again
    assert asyncio.run(imported_state(database_url)) == (head, manifests)


def test_import_needs_a_directory_option(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["import", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "--lineage-dir" in result.output
