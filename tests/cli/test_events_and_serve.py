"""``ledger events`` (paging and --follow) and ``ledger serve`` (refuses a database behind head)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from ledger.log import migrate
from ledger.log.engines import create_async_db_engine
from ledger.log.projection_versions import projection_versions
from tests.cli.support import append_events, invoke, ledger_process, seed
from tests.support.server import free_port

POLL_TIMEOUT = 120.0


def json_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def test_events_prints_the_log_as_json_lines(database_url: str) -> None:
    seed(database_url, 5)
    result = invoke(database_url, "events")
    assert result.exit_code == 0, result.output
    records = json_lines(result.stdout)
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5]
    assert records[0]["kind"] == "rollout.retired"
    assert records[0]["payload"] == {"had_rows": True}
    assert records[0]["rollout_id"] == "r0"
    assert len(records[0]["hash"]) == 64


def test_events_after_and_limit(database_url: str) -> None:
    seed(database_url, 8)
    result = invoke(database_url, "events", "--after", "2", "--limit", "3")
    assert result.exit_code == 0, result.output
    assert [r["seq"] for r in json_lines(result.stdout)] == [3, 4, 5]
    tail = invoke(database_url, "events", "--after", "6")
    assert [r["seq"] for r in json_lines(tail.stdout)] == [7, 8]
    beyond = invoke(database_url, "events", "--after", "100")
    assert beyond.exit_code == 0 and beyond.stdout == ""


def test_events_of_one_rollout(database_url: str) -> None:
    seed(database_url, 8)
    result = invoke(database_url, "events", "--rollout", "r1")
    assert {r["rollout_id"] for r in json_lines(result.stdout)} == {"r1"}
    assert [r["seq"] for r in json_lines(result.stdout)] == [2, 6]


def wait_for_lines(path: Path, count: int, process: subprocess.Popen[bytes]) -> list[str]:
    deadline = time.monotonic() + POLL_TIMEOUT
    while time.monotonic() < deadline:
        lines = [line for line in path.read_text().splitlines() if line.startswith("{")]
        if len(lines) >= count:
            return lines
        assert process.poll() is None, f"ledger events exited early:\n{path.read_text()}"
        time.sleep(0.05)  # poll
    raise AssertionError(f"expected {count} lines, got:\n{path.read_text()}")


@pytest.mark.slow
def test_events_follow_prints_new_events_as_they_arrive(database_url: str, tmp_path: Path) -> None:
    seed(database_url, 2)
    output = tmp_path / "follow.out"
    process = ledger_process(
        ["events", "--follow", "--interval", "0.05", "--after", "1"],
        data_dir=tmp_path / "data",
        database_url=database_url,
        stdout=output,
    )
    try:
        assert [json.loads(x)["seq"] for x in wait_for_lines(output, 1, process)] == [2]
        asyncio.run(append_events(database_url, 3, first=2))
        lines = wait_for_lines(output, 4, process)
        assert [json.loads(x)["seq"] for x in lines] == [2, 3, 4, 5]
        asyncio.run(append_events(database_url, 1, first=5))
        lines = wait_for_lines(output, 5, process)
        assert [json.loads(x)["seq"] for x in lines] == [2, 3, 4, 5, 6]
        assert process.poll() is None, "--follow keeps running"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.slow
def test_serve_refuses_a_database_behind_head(empty_database_url: str, tmp_path: Path) -> None:
    asyncio.run(migrate.upgrade(empty_database_url, "0001_events"))
    output = tmp_path / "serve.out"
    process = ledger_process(
        ["serve", "--port", str(free_port())],
        data_dir=tmp_path / "data",
        database_url=empty_database_url,
        stdout=output,
    )
    assert process.wait(timeout=60) == 1
    text = output.read_text()
    assert "not at head" in text and "ledger db upgrade" in text
    assert asyncio.run(migrate.current_revision(empty_database_url)) == "0001_events"


async def _mark_for_rebuild(database_url: str, projection: str) -> None:
    engine = create_async_db_engine(database_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(projection_versions)
                .where(projection_versions.c.projection == projection)
                .values(version=0)
            )
    finally:
        await engine.dispose()


@pytest.mark.slow
def test_serve_refuses_a_stale_projection(database_url: str, tmp_path: Path) -> None:
    asyncio.run(_mark_for_rebuild(database_url, "lineage"))
    output = tmp_path / "serve.out"
    process = ledger_process(
        ["serve", "--port", str(free_port())],
        data_dir=tmp_path / "data",
        database_url=database_url,
        stdout=output,
    )
    assert process.wait(timeout=60) == 1
    text = output.read_text()
    assert "projections not built by this version" in text and "lineage" in text
    assert "ledger db upgrade" in text


@pytest.mark.slow
def test_serve_upgrade_upgrades_first(empty_database_url: str, tmp_path: Path) -> None:
    asyncio.run(migrate.upgrade(empty_database_url, "0001_events"))
    port = free_port()
    output = tmp_path / "serve.out"
    process = ledger_process(
        ["serve", "--upgrade", "--port", str(port), "--log-level", "warning"],
        data_dir=tmp_path / "data",
        database_url=empty_database_url,
        stdout=output,
    )
    try:
        deadline = time.monotonic() + POLL_TIMEOUT
        ready: httpx.Response | None = None
        while time.monotonic() < deadline and ready is None:
            assert process.poll() is None, f"serve exited:\n{output.read_text()}"
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
            except httpx.TransportError:
                time.sleep(0.05)  # poll
        assert ready is not None, output.read_text()
        assert ready.status_code == 200
        assert ready.json()["revision"] == migrate.head_revision()
    finally:
        process.terminate()
        # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status tells why.
        assert process.wait(timeout=30) in (0, -signal.SIGTERM), output.read_text()
    assert asyncio.run(migrate.current_revision(empty_database_url)) == migrate.head_revision()
    token_file = tmp_path / "data" / "control-token"
    logged = output.read_text()
    assert f"control token: {token_file} (mode 0600)" in logged
    assert token_file.read_text().strip() not in logged
