"""``ledger sql`` is bounded: a statement timeout (a setting and --timeout), a row limit (a
setting and --limit), and a SQLite path that opens exactly the file named, read-only."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.app.cli.main import main
from ledger.log import migrate
from ledger.log.adhoc import sqlite_read_only_uri
from tests.cli.support import invoke, query, seed

# Runs for minutes on either backend unless cancelled (a cross join of a recursive count).
ENDLESS = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) "
    "SELECT count(*) FROM n AS a"
)


def test_a_long_query_is_cancelled_by_the_timeout_option(database_url: str) -> None:
    result = invoke(database_url, "sql", "--timeout", "0.2", ENDLESS)
    assert result.exit_code == 1, result.output
    assert "query cancelled" in result.output
    assert "0.2 s statement timeout" in result.output


def test_the_timeout_is_a_setting(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_SQL_TIMEOUT_S", "0.3")
    result = invoke(database_url, "sql", ENDLESS)
    assert result.exit_code == 1, result.output
    assert "0.3 s statement timeout" in result.output
    # A quick query under the same setting is answered.
    assert invoke(database_url, "sql", "SELECT 1 AS one").exit_code == 0


def test_the_row_limit_is_a_setting_and_says_when_it_cut(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(database_url, 7)
    monkeypatch.setenv("LEDGER_SQL_MAX_ROWS", "3")
    result = invoke(database_url, "sql", "--format", "json", "SELECT seq FROM events ORDER BY seq")
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["seq"] for line in result.stdout.splitlines()] == [1, 2, 3]
    assert "first 3 are shown" in result.stderr
    exact = invoke(
        database_url, "sql", "--limit", "7", "--format", "json", "SELECT seq FROM events"
    )
    assert len(exact.stdout.splitlines()) == 7
    assert "are shown" not in exact.stderr


def test_a_bad_limit_or_timeout_is_refused(database_url: str) -> None:
    for option, value in (("--limit", "0"), ("--timeout", "0"), ("--timeout", "-1")):
        result = invoke(database_url, "sql", option, value, "SELECT 1")
        assert result.exit_code == 2
        assert option in result.output


@pytest.mark.parametrize("name", ["we#ird", "100%", "sp ace", "we#ird&mode=rw"])
def test_a_data_directory_with_uri_characters_opens_that_file_read_only(
    tmp_path: Path, name: str
) -> None:
    data_dir = tmp_path / name
    data_dir.mkdir()
    database = data_dir / "ledger.db"
    asyncio.run(migrate.upgrade(f"sqlite+aiosqlite:///{database}"))
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE marker (name TEXT)")
        conn.execute("INSERT INTO marker VALUES (?)", (name,))
    # A truncated path (``we`` for ``we#ird``) would have been created, read-write.
    existed = {p.name for p in tmp_path.iterdir()}
    result = CliRunner().invoke(
        main, ["--data-dir", str(data_dir), "sql", "--format", "json", "SELECT name FROM marker"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"name": name}
    assert {p.name for p in tmp_path.iterdir()} == existed
    # The URI opens the file read-only.
    read_only = sqlite3.connect(sqlite_read_only_uri(str(database)), uri=True)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            read_only.execute("INSERT INTO marker VALUES ('x')")
    finally:
        read_only.close()
    assert query(f"sqlite+aiosqlite:///{database}", "SELECT count(*) FROM marker") == [(1,)]
