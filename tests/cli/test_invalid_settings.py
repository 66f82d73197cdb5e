"""A setting that does not validate is a usage error naming it (exit status 2), never a
pydantic traceback: an option, an environment variable, and a rule across settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def run_ledger(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--data-dir", str(tmp_path / "data"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ("serve", "--port", "70000"),
            {},
            "settings.port: Input should be less than or equal to 65535 (set by an option or "
            "its LEDGER_ variable)",
        ),
        (
            ("serve",),
            {"LEDGER_SQL_MAX_ROWS": "0"},
            "settings.sql_max_rows: Input should be greater than or equal to 1",
        ),
        (
            ("serve",),
            {"LEDGER_OTLP_ENDPOINT": "not-a-url"},
            "settings: an OTLP endpoint is an http(s) URL; got 'not-a-url'",
        ),
    ],
)
def test_an_invalid_setting_is_a_usage_error_naming_it(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], expected: str
) -> None:
    ran = run_ledger(tmp_path, *args, env=env)
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr
    assert expected in ran.stderr
    assert ran.stdout == ""
