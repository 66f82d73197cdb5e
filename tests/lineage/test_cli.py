"""``ledger manifest|retire|delete`` against a real server process, and ``ledger control
hold|release`` written by another process (the hold is shared through the database)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from ledger.app.cli.main import main
from tests.lineage.rows import committed_row
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path, database_url: str) -> Iterator[ServerProcess]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with ServerProcess(data_dir=data_dir, database_url=database_url) as running:
        yield running


def run(server: ServerProcess, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """Run the CLI with the server's data dir (token from <data-dir>/control-token)."""
    result = CliRunner().invoke(
        main,
        [
            "--data-dir",
            str(server.data_dir),
            "--database-url",
            server.database_url,
            *args,
        ],
        input=stdin,
        env={"LEDGER_URL": server.base_url, "LEDGER_CONTROL_TOKEN": ""},
    )
    return result.exit_code, result.output


def test_manifest_retire_delete_and_hold(server: ServerProcess) -> None:
    row = committed_row("r1", "c1")
    posted = httpx.post(f"{server.base_url}/v1/rollouts/r1/ledger/rows", json=row)
    assert posted.status_code == 200

    code, output = run(server, "manifest", "r1")
    assert code == 0, output
    body = json.loads(output)
    assert [r["model_call_id"] for r in body["records"]] == ["c1"]

    code, output = run(server, "control", "hold", "--reason", "checkpoint 7 open")
    assert (code, output.strip()) == (0, "removal hold set")
    code, output = run(server, "control", "status")
    assert "checkpoint 7 open" in output
    code, output = run(server, "retire", "r1")
    assert code == 1
    assert "HTTP 409" in output and "checkpoint 7 open" in output
    code, output = run(server, "control", "release")
    assert (code, output.strip()) == (0, "removal hold released")

    code, output = run(server, "retire", "-", stdin="r1\n\nr2\nr1\n")
    assert code == 0, output
    assert json.loads(output) == {"removed": ["r1"], "absent": ["r2"]}
    code, output = run(server, "manifest", "r1")
    assert code == 3 and "rollout r1 is retired" in output

    code, output = run(server, "delete", "r1", "r2")
    assert code == 0, output
    assert json.loads(output) == {"removed": [], "absent": ["r1", "r2"]}
    code, output = run(server, "manifest", "r1")
    assert code == 0 and json.loads(output)["records"] == []


def test_bad_ids_and_bad_tokens_are_clear_errors(server: ServerProcess) -> None:
    code, output = run(server, "retire", "ok", "bad id")
    assert code == 1 and "Invalid rollout id: 'bad id'" in output
    code, output = run(server, "manifest", "r1", "--token", "wrong")
    assert code == 1 and "HTTP 401" in output
