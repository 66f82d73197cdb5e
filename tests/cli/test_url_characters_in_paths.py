"""A data directory whose name holds URL characters keeps its database (issue 31, defect 4).

``X/data?x=1`` made the URL ``sqlite+aiosqlite:///X/data?x=1/ledger.db``, whose path ends at
the ``?``: every command opened (and created) ``X/data`` instead. The commands here run as an
operator runs them, with ``--data-dir`` only, and nothing may appear outside the directories
named."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from ledger.app.cli.main import main
from ledger.log.engines import sqlite_path, sqlite_url
from tests.support.exchanges import chat_exchange
from tests.support.server import ServerProcess

# A '?' starts a URL's query, a '#' its fragment, a '%' an escape, a space is escaped too.
URL_CHARACTERS = "data?x=1#frag%41 dir"


def ledger(data_dir: Path, *args: str) -> Result:
    result = CliRunner().invoke(main, ["--data-dir", str(data_dir), *args])
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result


@pytest.mark.parametrize(
    "path",
    ["/srv/plain/ledger.db", f"/srv/{URL_CHARACTERS}/ledger.db", "/srv/a%3Fb/ledger.db"],
)
def test_sqlite_path_reads_back_the_path_sqlite_url_was_built_from(path: str) -> None:
    for driver in ("sqlite+aiosqlite", "sqlite+pysqlite"):
        assert sqlite_path(sqlite_url(path, driver=driver)) == path


@pytest.mark.slow
def test_every_command_keeps_the_database_in_a_data_dir_with_url_characters(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    data_dir = root / URL_CHARACTERS
    ledger(data_dir, "db", "upgrade")
    assert (data_dir / "ledger.db").is_file()
    assert os.listdir(root) == [URL_CHARACTERS]

    # serve with the default database (no LEDGER_DATABASE_URL): it appends and mirrors there.
    with (
        ServerProcess(data_dir=data_dir, database_url="") as server,
        httpx.Client(base_url=server.base_url, timeout=60) as http,
    ):
        reply = http.post("/v1/rollouts/r1/model-calls", json=chat_exchange())
        assert reply.status_code == 201, reply.text
        assert http.get("/readyz").status_code == 200
        mirrored = data_dir / "mirror" / "model-calls" / "r1.capture.jsonl"
        deadline = time.monotonic() + 60
        while not mirrored.is_file():
            assert time.monotonic() < deadline, "the mirror never wrote r1"
            time.sleep(0.05)  # poll

    assert "head:         seq 1" in ledger(data_dir, "mirror", "status").output
    ledger(data_dir, "db", "check")
    ledger(data_dir, "verify")
    backup = root / "backup?y=2#z.db"
    ledger(data_dir, "backup", str(backup))
    restored = root / "restored?z=3#w"
    ledger(restored, "restore", str(backup))
    assert (restored / "ledger.db").is_file()
    assert "ok   hash chain: 1 events" in ledger(restored, "verify").output
    assert "│ 1 │" in ledger(restored, "sql", "SELECT count(*) AS n FROM events").output

    assert sorted(os.listdir(root)) == sorted([URL_CHARACTERS, backup.name, restored.name])
    assert os.listdir(tmp_path) == ["root"]
