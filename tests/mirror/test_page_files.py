"""A page of mirror changes: one durable append per file, same files as event by event."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.mirror import files as mirror_files
from ledger.mirror.files import PageFiles


def test_appends_are_gathered_per_file_and_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[Path] = []
    real = mirror_files.append_durably

    def counting(path: Path, data: bytes) -> None:
        written.append(path)
        real(path, data)

    monkeypatch.setattr(mirror_files, "append_durably", counting)
    a, b = tmp_path / "sub" / "a.jsonl", tmp_path / "sub" / "b.jsonl"
    a.parent.mkdir()
    a.write_bytes(b"old\n")
    files = PageFiles()
    for line in (b"1\n", b"2\n", b"3\n"):
        files.append(a, line)
    files.append(b, b"x\n")
    assert not b.exists()  # nothing is written before the page ends
    changed = files.finish()
    assert a.read_bytes() == b"old\n1\n2\n3\n" and b.read_bytes() == b"x\n"
    assert sorted(written) == [a, b] and changed == {a, b}


def test_removals_and_replacements_keep_event_order(tmp_path: Path) -> None:
    ledger, fence = tmp_path / "r.jsonl", tmp_path / "r.retired"
    ledger.write_bytes(b"kept?\n")
    files = PageFiles()
    files.append(ledger, b"dropped\n")  # before the removal: removed with the file
    files.remove(ledger)
    files.replace(fence, b"")
    files.append(ledger, b"after\n")  # after the removal: a new file
    changed = files.finish()
    assert ledger.read_bytes() == b"after\n" and fence.read_bytes() == b""
    assert changed == {ledger, fence}
    again = PageFiles()
    again.remove(tmp_path / "never-existed")
    assert again.finish() == set()
