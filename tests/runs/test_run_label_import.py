"""``ledger import --capture-dir DIR --run LABEL`` on both backends: every rollout imported is
labelled, a rollout labelled otherwise is skipped and reported, re-running adds nothing, and a
bad label or a label without a capture directory is a usage error."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner, Result
from sqlalchemy import text

from ledger.app.areas import default_catalogue, write_side_projectors
from ledger.app.cli.main import main
from ledger.areas.captures.service import CaptureService
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log.store import LedgerStore
from tests.support.exchanges import chat_exchange


async def _import(database_url: str, tmp_path: Path, *args: str) -> Result:
    return await asyncio.to_thread(
        CliRunner().invoke,
        main,
        ["--data-dir", str(tmp_path / "data"), "--database-url", database_url, "import", *args],
    )


async def _state(database_url: str) -> tuple[dict[str, str], int]:
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    try:
        async with store.read() as conn:
            labels = await conn.execute(text("SELECT rollout_id, run_label FROM run_labels"))
            count = await conn.execute(text("SELECT COUNT(*) FROM events"))
            return {row[0]: row[1] for row in labels}, int(count.scalar_one())
    finally:
        await store.close()


async def test_import_labels_each_rollout(database_url: str, tmp_path: Path) -> None:
    directory = tmp_path / "captures"
    directory.mkdir()
    for rollout in ("r1", "r2", "taken"):
        line = serialize_capture_line(chat_exchange(model_call_id=f"{rollout}-c"))
        (directory / f"{rollout}.capture.jsonl").write_text(line + "\n")
    (directory / "r1.capture.incomplete").touch()
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        await CaptureService(store).append("taken", chat_exchange(model_call_id="x"), run="other")
    finally:
        await store.close()

    result = await _import(database_url, tmp_path, "--capture-dir", str(directory), "--run", "imp")
    assert result.exit_code == 0, result.output
    assert "2 rollouts labelled run 'imp'" in result.output
    assert "skipped: rollout 'taken' belongs to run 'other', not 'imp'" in result.output
    labels, events = await _state(database_url)
    assert labels == {"r1": "imp", "r2": "imp", "taken": "other"}
    # taken: its own capture and label only (its file was left out).
    assert events == 2 + 2 * 2 + 1

    again = await _import(database_url, tmp_path, "--capture-dir", str(directory), "--run", "imp")
    assert again.exit_code == 0, again.output
    assert "0 rollouts labelled" in again.output
    assert await _state(database_url) == (labels, events)


async def test_bad_run_options_are_usage_errors(database_url: str, tmp_path: Path) -> None:
    directory = tmp_path / "captures"
    directory.mkdir()
    for args, words in (
        (["--capture-dir", str(directory), "--run", "two words"], "run label"),
        (["--lineage-dir", str(directory), "--run", "a"], "--run labels the rollouts"),
        (["--capture-dir", str(directory), "--follow", "--run", "a"], "not --follow"),
    ):
        result = await _import(database_url, tmp_path, *args)
        assert result.exit_code == 2, result.output
        assert words in result.output
