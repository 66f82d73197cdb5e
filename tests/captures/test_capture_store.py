"""Projections, verify and the SQL views of the captures area, on every backend."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from sqlalchemy.engine import make_url

from ledger.app.areas import default_catalogue, default_projectors
from ledger.app.bootstrap import catch_up_views
from ledger.areas.captures.service import CaptureService
from ledger.log.adhoc import run_readonly_query
from ledger.log.records import NewEvent
from ledger.log.rollout_events import ROLLOUT_DELETED
from ledger.log.store import LedgerStore
from ledger.log.verify import verify_projections
from tests.support.exchanges import chat_exchange, failed_exchange, messages_exchange


@pytest.fixture
def captures(store: LedgerStore) -> CaptureService:
    return CaptureService(store)


async def test_projections_rebuild_identically_after_every_kind_of_event(
    store: LedgerStore, captures: CaptureService
) -> None:
    await captures.append("r1", chat_exchange(model_call_id="a"))
    await captures.append("r1", failed_exchange(model_call_id="b"))
    await captures.mark_incomplete("r1", "disk full")
    await captures.announce_pending("r1", "c")
    await captures.append("r2", messages_exchange(model_call_id="a"))
    await captures.clear("r2")
    await captures.append("r2", messages_exchange(model_call_id="a2"))
    await captures.announce_pending("r2", "gone")
    await captures.withdraw_pending("r2", "gone")
    await store.append(NewEvent(ROLLOUT_DELETED, {"had_rows": True}, rollout_id="r1"))
    await captures.append("r1", chat_exchange(model_call_id="a"))
    await catch_up_views(store)
    async with store.read() as conn:
        report = await verify_projections(conn, default_catalogue(), default_projectors())
    assert report.ok, report.differences
    # The new generation starts at position 0 and reuses the id without conflict.
    calls = (await captures.model_calls("r1", payloads=False))["calls"]
    assert [(c["model_call_id"], c["call_index"]) for c in calls] == [("a", 0)]


async def test_sql_views_give_normalised_columns_and_null_aware_sums(
    store: LedgerStore, captures: CaptureService, database_url: str
) -> None:
    await captures.append("r1", chat_exchange(model_call_id="a", prompt_tokens=10))
    await captures.append("r1", failed_exchange(model_call_id="b"))
    await captures.append("r1", messages_exchange(model_call_id="c"))
    await captures.mark_incomplete("r2")
    await catch_up_views(store)  # the SQL views read the capture view's rows
    rows = await run_readonly_query(
        database_url,
        "SELECT call_index, model_call_id, dialect, model, status_code, tokens_in, "
        "tokens_out, cached_tokens, latency_total_ms, num_tool_calls "
        "FROM model_calls WHERE rollout_id = 'r1' ORDER BY call_index",
    )
    assert [list(r) for r in rows.rows] == [
        [0, "a", "chat", "m-chat", 200, 10, 5, 4, 1250.5, 1],
        [1, "b", "chat", "m-chat", 503, None, None, None, 100.0, 0],
        [2, "c", "messages", "claude", 200, 127, 2, 100, 500.0, 0],
    ]
    metrics = await run_readonly_query(
        database_url,
        "SELECT rollout_id, tokens_in, tokens_reasoning, latency_total_ms, num_calls "
        "FROM rollout_model_call_metrics ORDER BY rollout_id",
    )
    assert [list(r) for r in metrics.rows] == [
        ["r1", 137, None, 1850.5, 3],
        ["r2", None, None, None, 0],
    ]
    attachment = await captures.attachment("r1", payloads=False)
    assert attachment["metrics"]["tokens_in"] == 137
    assert attachment["metrics"]["tokens_reasoning"] is None


async def test_views_answer_from_the_databases_own_shell(
    store: LedgerStore, captures: CaptureService, database_url: str
) -> None:
    """Plain ``sqlite3`` / ``psql``, no ledger code in between."""
    await captures.append("r1", chat_exchange(model_call_id="a", prompt_tokens=10))
    await captures.append("r1", messages_exchange(model_call_id="b"))
    await catch_up_views(store)
    query = "SELECT rollout_id, num_calls, tokens_in FROM rollout_model_call_metrics"
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        command = ["sqlite3", "-readonly", str(url.database), query]
    else:
        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        command = ["psql", dsn, "-At", "-F", "|", "-c", query]
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed")
    shell = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, errors = await shell.communicate()
    assert shell.returncode == 0, errors.decode()
    assert out.decode().strip() == "r1|2|137"
