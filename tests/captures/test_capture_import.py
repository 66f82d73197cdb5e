"""``ledger import --capture-dir``: Gym directories become events, damaged lines are evidence."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner, Result

from ledger.app.areas import (
    default_catalogue,
    default_mirror_areas,
    write_side_projectors,
)
from ledger.app.cli.main import main
from ledger.areas.captures.service import CaptureService
from ledger.gym.capture_lines import serialize_capture_line
from ledger.log.store import LedgerStore
from ledger.mirror.follower import build_follower
from tests.support.exchanges import chat_exchange, messages_exchange, responses_exchange
from tests.support.mirror import gym_tolerant_records, wait_for_mirror


async def _import(database_url: str, tmp_path: Path, directory: Path) -> Result:
    return await asyncio.to_thread(
        CliRunner().invoke,
        main,
        [
            "--data-dir",
            str(tmp_path / "data"),
            "--database-url",
            database_url,
            "import",
            "--capture-dir",
            str(directory),
        ],
    )


def _gym_directory(root: Path) -> Path:
    directory = root / "captures"
    directory.mkdir()
    unbuildable = {**chat_exchange(), "model_ref": {"type": "other_models", "name": "m"}}
    lines = [
        serialize_capture_line(chat_exchange(model_call_id="c0")),
        "",
        "not json at all",
        "[1, 2, 3]",
        json.dumps(unbuildable),
        serialize_capture_line(responses_exchange(model_call_id="c4")),
        "   ",
        json.dumps(messages_exchange(model_call_id="c5")),
    ]
    (directory / "r1.capture.jsonl").write_text("\n".join(lines) + "\n")
    (directory / "r1.capture.incomplete").write_bytes(b"")
    (directory / "r2.capture.jsonl").write_text(
        serialize_capture_line(chat_exchange(model_call_id="only")) + "\n"
    )
    (directory / ".hidden.capture.jsonl").write_text("{}\n")
    (directory / "README.txt").write_text("not a capture file")
    return directory


async def test_import_follows_gym_tolerant_read_and_is_idempotent(
    database_url: str, tmp_path: Path
) -> None:
    directory = _gym_directory(tmp_path)
    first = await _import(database_url, tmp_path, directory)
    assert first.exit_code == 0, first.output
    assert "3 files, 2 rollouts, 7 lines: 5 captured, 2 damaged" in first.output
    assert "1 incomplete markers" in first.output
    assert "skipped .hidden.capture.jsonl" in first.output

    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        captures = CaptureService(store)
        served = await captures.model_calls("r1", payloads=True)
        expected, damaged = gym_tolerant_records(directory / "r1.capture.jsonl")
        assert served["calls"] == expected
        assert [c["call_index"] for c in served["calls"]] == [0, 4, 5]
        assert damaged == 3
        assert served["gaps"] == [
            {"code": "model_call_capture_records_unreadable", "detail": "count=3"},
            {"code": "model_call_capture_incomplete"},
        ]
        head_before = await store.head_seq()

        again = await _import(database_url, tmp_path, directory)
        assert again.exit_code == 0, again.output
        assert "0 captured, 0 damaged (kept as evidence), 7 already present" in again.output
        assert "0 incomplete markers" in again.output
        assert await store.head_seq() == head_before

        # The mirror writes the file back so that Gym's tolerant read sees the same thing.
        mirror_dir = tmp_path / "mirror"
        follower = build_follower(store=store, mirror_dir=mirror_dir, areas=default_mirror_areas())
        await follower.start()
        await wait_for_mirror(store)
        await follower.stop()
        mirrored = gym_tolerant_records(mirror_dir / "model-calls" / "r1.capture.jsonl")
        assert mirrored == (expected, damaged)
        assert (mirror_dir / "model-calls" / "r1.capture.incomplete").exists()
    finally:
        await store.close()


async def test_import_keeps_a_reused_id_with_other_content_as_evidence(
    database_url: str, tmp_path: Path
) -> None:
    directory = tmp_path / "captures"
    directory.mkdir()
    (directory / "r1.capture.jsonl").write_text(
        serialize_capture_line(chat_exchange(model_call_id="same"))
        + "\n"
        + serialize_capture_line(chat_exchange(model_call_id="same", text="different"))
        + "\n"
    )
    result = await _import(database_url, tmp_path, directory)
    assert result.exit_code == 0, result.output
    assert "1 lines reuse a model_call_id" in result.output
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        attachment = await CaptureService(store).attachment("r1", payloads=False)
        assert [c["model_call_id"] for c in attachment["calls"]] == ["same"]
        assert attachment["gaps"] == [
            {"code": "model_call_capture_records_unreadable", "detail": "count=1"}
        ]
    finally:
        await store.close()


async def test_import_keeps_a_line_holding_a_nul_as_evidence(
    database_url: str, tmp_path: Path
) -> None:
    """The HTTP boundary refuses a NUL (PostgreSQL's text cannot hold one, and both backends
    take the same); a capture line holding one is damaged evidence, so no view has to store it."""
    directory = tmp_path / "captures"
    directory.mkdir()
    held = responses_exchange(model_call_id="nul")
    held["response"] = {**held["response"], "status": "comp\x00leted"}
    escaped_backslash = chat_exchange(model_call_id="not-nul", text="a \\u0000 b")
    lines = [
        serialize_capture_line(chat_exchange(model_call_id="c0")),
        serialize_capture_line(held),
        serialize_capture_line(escaped_backslash),
    ]
    (directory / "r1.capture.jsonl").write_text("\n".join(lines) + "\n")
    result = await _import(database_url, tmp_path, directory)
    assert result.exit_code == 0, result.output
    assert "3 lines: 2 captured, 1 damaged" in result.output
    store = LedgerStore(database_url, default_catalogue(), write_side_projectors())
    await store.open()
    try:
        served = await CaptureService(store).model_calls("r1", payloads=False)
        assert [c["model_call_id"] for c in served["calls"]] == ["c0", "not-nul"]
        assert served["gaps"] == [
            {"code": "model_call_capture_records_unreadable", "detail": "count=1"}
        ]
    finally:
        await store.close()
