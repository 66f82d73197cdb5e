"""health_findings, the health follower and the freshness rule, on both backends: answers from
the stored rows equal the rules over the export (every ignored-check case, attempts, records
without a task index); a record changed after its row was computed is checked on read; the
SQL views and the verdict gauges agree with the routes."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import Counter
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Connection, text

from ledger.app.areas import view_projectors
from ledger.app.bootstrap import Ledger, catch_up_views
from ledger.areas.health import queries
from ledger.areas.health.follower import HealthFollower
from ledger.areas.health.row_figures import stored_columns
from ledger.areas.health.selection import Selection, superseded_attempts
from ledger.areas.health.service import HealthService
from ledger.areas.health.summary_query import _summarised, summarise_quickly
from ledger.gym.health.catalogue import ALL_CHECKS
from ledger.gym.health.compact import (
    CompactDigest,
    compact_digest,
    summarise,
)
from ledger.gym.health.evaluate import evaluate
from ledger.gym.health.facts import record_facts
from ledger.gym.health.run import check_records
from ledger.gym.health.summary import summary_bytes, verdict_lines
from ledger.log.rebuild import start_views_build
from ledger.log.transaction import WriteTransaction
from tests.health.support import expected_report, exported, write_run
from tests.support.health_run import RAISING_CHECK, generate_run
from tests.support.views import views_caught_up

RUN = 60
IGNORED_CASES: list[list[str]] = [
    [],
    ["model_call_failed"],
    ["check_execution_error"],
    ["rollout_duplicate_identity", "task_consistently_unhealthy"],
    ["record_unreadable", "trajectory_capture_mismatch", "task_no_successful_model_calls"],
    list(ALL_CHECKS),
]


async def _paused(app: FastAPI) -> tuple[Ledger, HealthFollower]:
    """The app's ledger with its own follower stopped, and a follower the test steps."""
    ledger: Ledger = app.state.ledger
    if ledger.health is not None:
        await ledger.health.stop()
    return ledger, HealthFollower(ledger.store, metrics=ledger.metrics)


def _late_call(model_call_id: str, **fields: Any) -> dict[str, Any]:
    """A capture posted to a rollout after its run was written."""
    return {
        "model_call_id": model_call_id,
        "dialect": "responses",
        "model_ref": {"type": "responses_api_models", "name": "policy"},
        "started_at": 99.0,
        "request": {"input": "q"},
        **fields,
    }


def _records(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_compact_digests_give_the_rules_files_for_every_ignored_case(
    client: httpx.AsyncClient,
) -> None:
    """The exported records shuffled, some copied (duplicate identities) and some without
    ``_ng_task_index`` (a positional default task index and verdict-line id)."""
    await write_run(client, generate_run(RUN, seed=4))
    records = _records(await exported(client))
    shuffled = random.Random(5)
    for record in records[::7]:
        record.pop("_ng_task_index", None)
    records = records + [dict(r) for r in shuffled.sample(records, len(records) // 5)]
    shuffled.shuffle(records)
    digests = [compact_digest(record) for record in records]
    for ignored in IGNORED_CASES:
        expected = check_records(records, ignored)
        summary, lines = summarise(digests, expected.ignored)
        assert summary_bytes(summary) == summary_bytes(expected.summary), ignored
        assert b"".join(lines) == b"".join(verdict_lines(expected.digests)), ignored


def _fetched(digests: list[CompactDigest]) -> list[tuple[Any, ...]]:
    """The rows the summary's statement would fetch for these digests, all fresh."""
    rows = []
    for d in digests:
        stored = stored_columns(d)
        # summary_query._row_columns' order; 1: the freshness flag.
        rows.append(
            (
                *(d.task_index, d.rollout_index, d.stage_index, d.verdict, d.issue_counts),
                *(stored["verdict_line"], d.errors_by_status, 1, stored["figures"]),
            )
        )
    return rows


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_the_lean_pass_gives_summarises_files(client: httpx.AsyncClient) -> None:
    """Integer identities (the sort's integer key), then string tasks, stages and negative
    indices (its general key), copies and positional task indices in both, and duplicate
    identities whose rollout ids JSON escapes (the stored line rewritten at its offsets)."""
    await write_run(client, generate_run(RUN, seed=4))
    records = _records(await exported(client))
    shuffled = random.Random(7)
    for record in records[::7]:
        record.pop("_ng_task_index", None)
    records = records + [dict(r) for r in shuffled.sample(records, len(records) // 5)]
    shuffled.shuffle(records)
    odd = [dict(r) for r in records]
    for position, record in enumerate(odd[::5]):
        record["_ng_task_index"] = f"t{position % 4}"
        record["_ng_rollout_index"] = -position
        record["_ng_stage_index"] = {"s": [position % 2, '],"findings":[]']}
    for position, record in enumerate(odd[::3]):
        record["_ng_rollout_id"] = f'ü"{position % 5},"verdict":"healthy"'
    assert any(c > 1 for c in Counter(r.get("_ng_rollout_id") for r in odd).values())
    for case in (records, odd):
        digests = [compact_digest(record) for record in case]
        for ignored in ([], ["task_consistently_unhealthy", "task_no_successful_model_calls"]):
            expected_summary, expected_lines = summarise(digests, ignored)
            quick = _summarised(_fetched(digests), ignored)
            assert quick is not None
            assert summary_bytes(quick.summary) == summary_bytes(expected_summary), ignored
            assert b"".join(quick.lines) == b"".join(expected_lines), ignored


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_a_line_derived_from_the_position_takes_the_general_path(
    client: httpx.AsyncClient,
) -> None:
    """A record with neither a task index nor a rollout id of its own has no stored line (its
    line's id is made of its position): the quick path declines, and ``summarise`` answers."""
    await write_run(client, generate_run(RUN, seed=4))
    records = _records(await exported(client))
    bare = dict(records[3])
    for key in ("_ng_task_index", "_ng_rollout_id"):
        bare.pop(key, None)
    trajectory = bare.get("ng_trajectory")
    if isinstance(trajectory, dict):
        bare["ng_trajectory"] = {k: v for k, v in trajectory.items() if k != "rollout_id"}
    digest = compact_digest(bare)
    assert digest.verdict_rollout_id is None and stored_columns(digest)["verdict_line"] is None
    digests = [compact_digest(record) for record in records]
    assert _summarised(_fetched(digests), []) is not None
    assert _summarised(_fetched([*digests, digest]), []) is None
    _, lines = summarise([*digests, digest], [])
    position = len(digests)  # its default task index, and so its line's id
    assert any(f'"rollout_id":"{position}-'.encode() in line for line in lines)


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_sql_sums_and_the_lean_pass_answer_fresh_selections(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """The quick path answers (not None) and equals ``summarise`` over the same rows: all
    attempts, the latest ones, globs, time windows; it declines a rollout check ignored or a
    stale row. Selections of one shape run one compiled statement with their own values."""
    ledger, follower = await _paused(app)
    planned = generate_run(RUN, seed=8)
    await write_run(client, planned)
    await views_caught_up(app)
    await follower.catch_up()
    long_ago, far_ahead = datetime(2000, 1, 1, tzinfo=UTC), datetime(2999, 1, 1, tzinfo=UTC)
    selections = [
        Selection(attempts="all"),
        Selection(),
        Selection(ids="1*", attempts="all"),
        Selection(ids="2*", attempts="all"),  # the shape of the one before, other values
        Selection(ids="*-1", attempts="all"),  # no literal prefix: a shape of its own
        Selection(since=long_ago, attempts="all"),
        Selection(since=long_ago, until=far_ahead, ids="1*", attempts="all"),
    ]

    def check(conn: Connection) -> None:
        queries.snapshot(conn)
        for selection in selections:
            rows = queries.selected_rows(conn, selection)
            excluded = (
                set()
                if selection.attempts == "all"
                else superseded_attempts(row.rollout_id for row in rows)
            )
            digests = [row.digest for row in rows if row.rollout_id not in excluded]
            assert all(digest is not None for digest in digests)
            quick = summarise_quickly(conn, selection, excluded, [])
            assert quick is not None and quick.records == len(digests) > 0
            summary, lines = summarise([d for d in digests if d is not None], [])
            assert summary_bytes(quick.summary) == summary_bytes(summary), selection
            assert quick.lines == lines, selection
        declined = summarise_quickly(conn, selections[0], set(), ["model_call_failed"])
        assert declined is None

    await ledger.store.read_sync(check)
    posted = await client.post(
        f"/v1/rollouts/{planned[0].rollout_id}/model-calls", json=_late_call("late")
    )
    assert posted.status_code == 201, posted.text
    await views_caught_up(app)
    assert (
        await ledger.store.read_sync(
            partial(summarise_quickly, selection=selections[0], excluded=set(), ignored=[])
        )
        is None
    )


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_rows_answer_exactly_once_the_follower_caught_up(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    ledger, follower = await _paused(app)
    await write_run(client, generate_run(RUN, seed=4))
    await views_caught_up(app)
    assert await follower.catch_up() > 0
    lines = await exported(client)
    service = HealthService(ledger.store.read_sync)
    for ignored in IGNORED_CASES:
        report = await service.report(Selection(attempts="all"), ignored)
        assert report.computed_on_read == 0
        expected = expected_report(lines, ignored)
        assert report.summary_bytes() == summary_bytes(expected.summary), ignored
        assert b"".join(report.verdict_lines()) == b"".join(verdict_lines(expected.digests))
    latest = await service.report(Selection())
    assert latest.computed_on_read == 0 and latest.counts.superseded_attempts > 0
    answer = (await client.get("/v1/health")).json()
    assert answer["quality_summary"] == latest.summary


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_a_record_newer_than_its_row_is_checked_on_read(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    ledger, follower = await _paused(app)
    planned = generate_run(20, seed=6)
    await write_run(client, planned)
    await views_caught_up(app)
    await follower.catch_up()
    service = HealthService(ledger.store.read_sync)
    changed = planned[0].rollout_id
    before = await client.get(f"/v1/rollouts/{changed}/health")
    failing = _late_call("late-failure", status_code=503, error_category="server_error")
    posted = await client.post(f"/v1/rollouts/{changed}/model-calls", json=failing)
    assert posted.status_code == 201, posted.text
    await views_caught_up(app)

    report = await service.report(Selection(attempts="all"))
    assert report.computed_on_read == 1
    expected = expected_report(await exported(client))
    assert report.summary_bytes() == summary_bytes(expected.summary)
    assert b"".join(report.verdict_lines()) == b"".join(verdict_lines(expected.digests))
    after = (await client.get(f"/v1/rollouts/{changed}/health")).json()
    assert after["last_seq"] > before.json()["last_seq"]
    assert _gyms_part(after) == await _computed_on_read(client, changed, after["last_seq"])

    assert await follower.catch_up() == 1
    again = await service.report(Selection(attempts="all"))
    assert again.computed_on_read == 0 and again.summary == report.summary


async def test_a_record_changed_after_the_settled_head_is_left_for_later(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """The serving loop checks records up to the newest record change it read a settle ago
    (``SettledHead``): a rollout still being written waits, the others do not."""
    ledger, follower = await _paused(app)
    planned = generate_run(4, seed=7)
    await write_run(client, planned)
    await views_caught_up(app)
    settled = await ledger.store.head_seq()
    writing = planned[0].rollout_id
    posted = await client.post(
        f"/v1/rollouts/{writing}/model-calls",
        json=_late_call("still-writing", status_code=200, response={"id": "r", "output": []}),
    )
    assert posted.status_code == 201, posted.text
    await views_caught_up(app)
    assert await follower.step(upto_seq=settled) == len(planned) - 1
    service = HealthService(ledger.store.read_sync)
    report = await service.report(Selection(attempts="all"))
    assert report.computed_on_read == 1  # the one being written: checked on read meanwhile
    assert await follower.step(upto_seq=settled) == 0
    assert await follower.catch_up() == 1
    assert (await service.report(Selection(attempts="all"))).computed_on_read == 0


def _gyms_part(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer without the ledger's own check (areas/evidence), which Gym has no part in."""
    return {key: value for key, value in answer.items() if key != "ledger_checks"}


async def _computed_on_read(client: httpx.AsyncClient, rollout_id: str, seq: int) -> Any:
    record = (await client.get(f"/v1/rollouts/{rollout_id}/record")).json()
    digest = evaluate(record_facts(record, 0, canonical_trajectory=True))
    return {
        "rollout_id": rollout_id,
        "last_seq": seq,
        "verdict": digest.verdict,
        "findings": [finding.public() for finding in digest.findings],
        "unobserved": list(digest.unobserved),
        "ignored_checks": [],
    }


@pytest.mark.health_check_errors(RAISING_CHECK)
async def test_one_rollout_from_its_row_equals_the_record_checked(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    _, follower = await _paused(app)
    planned = generate_run(RUN, seed=9)
    await write_run(client, planned)
    await views_caught_up(app)
    await follower.catch_up()
    for rollout in planned[::3]:
        answer = await client.get(f"/v1/rollouts/{rollout.rollout_id}/health")
        if answer.status_code == 404:
            continue
        health = answer.json()
        expected = await _computed_on_read(client, rollout.rollout_id, health["last_seq"])
        assert _gyms_part(health) == expected


async def _sql(ledger: Ledger, query: str) -> list[Any]:
    async with ledger.store.read() as conn:
        return list((await conn.execute(text(query))).all())


async def test_views_equal_the_route_answers(app: FastAPI, client: httpx.AsyncClient) -> None:
    ledger, follower = await _paused(app)
    planned = generate_run(RUN, seed=10)
    await write_run(client, planned)
    await views_caught_up(app)
    await follower.catch_up()
    ids = [row.rollout_id for row in await _sql(ledger, "SELECT rollout_id FROM rollout_health")]
    assert ids
    routes = {}
    for rollout_id in ids:
        routes[rollout_id] = (await client.get(f"/v1/rollouts/{rollout_id}/health")).json()

    rows = await _sql(
        ledger, "SELECT rollout_id, verdict, finding_count, unobserved, fresh FROM rollout_health"
    )
    for row in rows:
        route = routes[row.rollout_id]
        assert bool(row.fresh)
        assert row.verdict == route["verdict"]
        assert row.finding_count == len(route["findings"])
        assert json.loads(row.unobserved) == route["unobserved"]

    findings = await _sql(
        ledger,
        "SELECT rollout_id, position, check_id, locator, detail FROM rollout_health_findings "
        "ORDER BY rollout_id, position",
    )
    by_rollout: dict[str, list[Any]] = {}
    for row in findings:
        by_rollout.setdefault(row.rollout_id, []).append(
            {
                "check": row.check_id,
                "locator": None if row.locator is None else json.loads(row.locator),
                "detail": json.loads(row.detail),
            }
        )
    for rollout_id, route in routes.items():
        assert by_rollout.get(rollout_id, []) == [
            {"check": f["check"], "locator": f.get("locator"), "detail": f["detail"]}
            for f in route["findings"]
        ]
    assert [row.position for row in findings if row.rollout_id == findings[0].rollout_id] == list(
        range(len(by_rollout[findings[0].rollout_id]))
    )

    tasks = await _sql(
        ledger, "SELECT task_index, rollouts, healthy, unhealthy, unobserved FROM task_health"
    )
    task_of = {
        row.rollout_id: row.task_index
        for row in await _sql(ledger, "SELECT rollout_id, task_index FROM rollout_health")
    }
    expected: dict[Any, Counter[str]] = {}
    for rollout_id, route in routes.items():
        expected.setdefault(task_of[rollout_id], Counter())[route["verdict"]] += 1
    assert len(tasks) == len(expected)
    for row in tasks:
        counted = expected[row.task_index]
        assert (row.healthy, row.unhealthy, row.unobserved) == (
            counted["healthy"],
            counted["unhealthy"],
            counted["unobserved"],
        )
        assert row.rollouts == sum(counted.values())


async def test_metrics_count_rollouts_by_verdict(app: FastAPI, client: httpx.AsyncClient) -> None:
    _, follower = await _paused(app)
    planned = generate_run(30, seed=11)
    await write_run(client, planned)
    await views_caught_up(app)
    await follower.catch_up()
    verdicts: Counter[str] = Counter()
    for rollout in planned:
        answer = await client.get(f"/v1/rollouts/{rollout.rollout_id}/health")
        if answer.status_code == 200:
            verdicts[answer.json()["verdict"]] += 1
    metrics = (await client.get("/metrics")).text
    for verdict in ("healthy", "unhealthy", "unobserved"):
        line = f'ledger_rollouts_by_verdict{{verdict="{verdict}"}} {float(verdicts[verdict])}'
        assert line in metrics, (line, metrics)
    assert "ledger_health_findings_behind_rollouts 0.0" in metrics


async def test_a_follower_checks_again_after_another_process_rebuilt_the_views(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """An upgrade elsewhere builds the views again, and swapping the build in empties the
    findings; a rebuilt record keeps its last_seq, so a follower going by its own mark alone
    would skip it."""
    ledger, follower = await _paused(app)
    await write_run(client, generate_run(20, seed=9))
    await views_caught_up(app)
    checked = await follower.catch_up()
    assert checked > 0
    service = HealthService(ledger.store.read_sync)
    assert (await service.report(Selection(attempts="all"))).computed_on_read == 0

    def reset(tx: WriteTransaction) -> None:
        start_views_build(tx.conn, view_projectors())

    await ledger.store.execute(reset)
    await catch_up_views(ledger.store)
    assert (await service.report(Selection(attempts="all"))).computed_on_read == checked
    assert await follower.catch_up() == checked
    assert (await service.report(Selection(attempts="all"))).computed_on_read == 0


async def test_the_apps_own_follower_keeps_up(app: FastAPI, client: httpx.AsyncClient) -> None:
    """The follower ``ledger serve`` runs: rows appear without anyone asking."""
    ledger: Ledger = app.state.ledger
    assert ledger.health is not None
    planned = generate_run(10, seed=12)
    await write_run(client, planned)
    await views_caught_up(app)
    service = HealthService(ledger.store.read_sync)
    for _ in range(200):
        report = await service.report(Selection(attempts="all"))
        if report.computed_on_read == 0:
            break
        await asyncio.sleep(0.05)  # poll until the follower caught up
    assert report.computed_on_read == 0
    assert report.summary == expected_report(await exported(client)).summary


async def test_the_documented_examples_run(app: FastAPI, client: httpx.AsyncClient) -> None:
    """Every SQL example of docs/sql.md's Health section runs on this backend."""
    ledger, follower = await _paused(app)
    await write_run(client, generate_run(20, seed=13))
    await views_caught_up(app)
    await follower.catch_up()
    text = (Path(__file__).parents[2] / "docs" / "sql.md").read_text()
    section = text.split("\n## Health")[1].split("\n## ")[0]
    examples = re.findall(r"```sql\n(.*?)```", section, flags=re.DOTALL)
    assert len(examples) == 3
    for example in examples:
        await _sql(ledger, example.strip().rstrip(";"))
    checks = await _sql(ledger, examples[1].strip().rstrip(";"))
    assert checks and all(row.findings >= row.rollouts for row in checks)
