"""The freshness rule (docs/architecture.md, "Freshness"): a rollout's reads see its own writes,
run-level reads say how far the views are, and a read past the wait's bound is a 503 with
``Retry-After``. The client here does not wait for the views after a write (the suite's
``client`` fixture does): these tests pin what a user of the HTTP API meets."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from ledger.app.config import Settings
from tests.api.support import ledger_of, running_app
from tests.support.exchanges import chat_exchange, responses_exchange


async def test_a_write_then_a_read_of_that_rollout_sees_it(settings: Settings) -> None:
    async with running_app(settings) as (_, http):
        for n in range(20):
            rollout_id = f"r{n}"
            posted = await http.post(
                f"/v1/rollouts/{rollout_id}/model-calls",
                json=chat_exchange(model_call_id=f"c{n}"),
            )
            assert posted.status_code == 201, posted.text
            # At once, with no wait of the test's own: the read waits for the views.
            record = await http.get(f"/v1/rollouts/{rollout_id}/record")
            assert record.status_code == 200, record.text
            calls = record.json()["ng_model_call_capture"]["calls"]
            assert [call["model_call_id"] for call in calls] == [f"c{n}"]
            trajectory = await http.get(f"/v1/rollouts/{rollout_id}/trajectory")
            assert trajectory.status_code == 200, trajectory.text
            health = await http.get(f"/v1/rollouts/{rollout_id}/health")
            assert health.status_code == 200, health.text
            assert health.json()["last_seq"] == posted.json()["seq"]


async def test_run_level_reads_say_how_far_the_views_are(settings: Settings) -> None:
    async with running_app(settings) as (app, http):
        posted = await http.post("/v1/rollouts/r1/model-calls", json=responses_exchange())
        seq = posted.json()["seq"]
        # With min_seq the read waits for the views to reach the append.
        answer = await http.get(f"/v1/health?min_seq={seq}")
        assert answer.status_code == 200, answer.text
        assert int(answer.headers["ledger-projected-seq"]) >= seq
        assert answer.json()["selection"]["matched"] == 1
        exported = await http.get(f"/v1/export?min_seq={seq}")
        assert int(exported.headers["ledger-projected-seq"]) >= seq
        assert [line for line in exported.text.splitlines() if line]
        # Without it, it answers at once and names the seq it answered from.
        plain = await http.get("/v1/perf-summary")
        assert int(plain.headers["ledger-projected-seq"]) <= await ledger_of(app).store.head_seq()
        # A rollout's own read carries no such header: it is as fresh as the rollout.
        assert "ledger-projected-seq" not in (await http.get("/v1/rollouts/r1/record")).headers


async def test_min_seq_is_checked(settings: Settings) -> None:
    async with running_app(settings) as (_, http):
        for bad in ("-1", "x", str(2**63)):
            answer = await http.get(f"/v1/health?min_seq={bad}")
            assert answer.status_code == 422, answer.text
            assert "min_seq" in answer.text
        # A seq no event has yet: a conflict with the log's state, at once, not waited for.
        posted = await http.post("/v1/rollouts/r1/model-calls", json=chat_exchange())
        beyond = posted.json()["seq"] + 1
        answer = await http.get(f"/v1/export?min_seq={beyond}")
        assert answer.status_code == 409, answer.text
        assert answer.json()["detail"] == (
            f"min_seq {beyond} is beyond the log's head ({beyond - 1}): no event has it"
        )


async def test_a_read_past_the_bound_is_a_503_with_retry_after(settings: Settings) -> None:
    short = settings.model_copy(update={"views_wait_s": 0.2})
    async with running_app(short) as (app, http):
        ledger = ledger_of(app)
        assert ledger.projector is not None
        # The projector stops: appends go on, the views stay where they are.
        await ledger.projector.stop()
        posted = await http.post("/v1/rollouts/late/model-calls", json=chat_exchange())
        assert posted.status_code == 201, posted.text
        for path in (
            "/v1/rollouts/late/record",
            "/v1/rollouts/late/trajectory",
            "/v1/rollouts/late/health",
            f"/v1/health?min_seq={posted.json()['seq']}",
        ):
            answer = await http.get(path)
            assert answer.status_code == 503, (path, answer.text)
            assert answer.headers["retry-after"] == "1"
            assert "views" in answer.json()["detail"]
            assert len(answer.json()["detail"]) < 300
        # A run-level read without min_seq answers from what the views hold.
        summary = await http.get("/v1/health")
        assert summary.status_code == 200
        assert int(summary.headers["ledger-projected-seq"]) < posted.json()["seq"]
        # The projector back: the same read answers, once it has caught up (a client retries
        # after Retry-After; the 0.2 s bound can pass before a restarted follower's first step
        # on a loaded machine).
        await ledger.projector.start()
        # Not views_caught_up: its wait has this app's 0.2 s bound, which a loaded machine
        # can pass before the restarted follower's first step (fresh-clone CI, PostgreSQL).
        deadline = time.monotonic() + 30
        while (await ledger.freshness.progress()).behind:
            assert time.monotonic() < deadline, "the restarted follower did not catch up"
            await asyncio.sleep(0.02)  # poll
        answer = await http.get("/v1/rollouts/late/record")
        assert answer.status_code == 200, answer.text


async def test_reads_and_appends_go_on_together(settings: Settings) -> None:
    """Many writers and readers of their own rollouts at once: every read sees its write."""

    async def one_rollout(http: httpx.AsyncClient, n: int) -> None:
        for k in range(5):
            body = chat_exchange(model_call_id=f"c{k}")
            posted = await http.post(f"/v1/rollouts/w{n}/model-calls", json=body)
            assert posted.status_code == 201, posted.text
            record = await http.get(f"/v1/rollouts/w{n}/record")
            calls = record.json()["ng_model_call_capture"]["calls"]
            assert len(calls) == k + 1

    async with running_app(settings) as (_, http):
        await asyncio.gather(*(one_rollout(http, n) for n in range(8)))


@pytest.mark.parametrize("path", ["/v1/rollouts/none/record", "/v1/rollouts/none/trajectory"])
async def test_a_rollout_never_written_is_a_404_without_waiting(
    settings: Settings, path: str
) -> None:
    async with running_app(settings.model_copy(update={"views_wait_s": 0.0})) as (app, http):
        ledger = ledger_of(app)
        assert ledger.projector is not None
        await ledger.projector.stop()
        await http.post("/v1/rollouts/other/model-calls", json=chat_exchange())
        answer = await http.get(path)
        assert answer.status_code == 404, answer.text


async def test_a_read_only_server_answers_with_what_the_views_hold(settings: Settings) -> None:
    async with running_app(settings) as (app, http):
        ledger = ledger_of(app)
        assert ledger.projector is not None
        await ledger.projector.stop()
        posted = await http.post(
            "/v1/rollouts/r1/model-calls", json=chat_exchange(model_call_id="a")
        )
        assert posted.status_code == 201, posted.text
    # Nothing moves the views of a server of reads only: no read waits for them.
    reader = settings.model_copy(update={"read_only": True})
    async with running_app(reader) as (_, http):
        # The record was never projected: what the views hold is no record, at once.
        record = await http.get("/v1/rollouts/r1/record")
        assert record.status_code == 404, record.text
        # The captures' documents are the capture view's since it follows the log (issue 27,
        # step 1): the call is not there yet either, and the read does not wait for it.
        calls = await http.get("/v1/rollouts/r1/model-calls")
        assert calls.status_code == 200 and calls.json()["calls"] == []
        behind = await http.get(f"/v1/health?min_seq={posted.json()['seq']}")
        assert behind.status_code == 503, behind.text
        assert behind.headers["retry-after"] == "1"
