"""``ledger export --otlp``'s options: each misuse is a usage error (exit 2) that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.otel.commands import ledger_export, upgraded


@pytest.mark.slow
def test_export_refuses_bad_options(tmp_path: Path) -> None:
    data_dir = tmp_path / "ledger"
    data_dir.mkdir()
    upgraded(data_dir)
    bad = ledger_export(data_dir, "--otlp", "ftp://x", "--run", "r")
    assert bad.returncode == 2 and "http(s) URL" in bad.stderr
    alone = ledger_export(data_dir, "--run", "r")
    assert alone.returncode == 2 and "only with --otlp" in alone.stderr
    mixed = ledger_export(data_dir, "--otlp", "http://127.0.0.1:9", "--view", "export")
    assert mixed.returncode == 2 and "--view: not with --otlp" in mixed.stderr
